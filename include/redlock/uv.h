// Opt-in: run a client on an event loop the embedding service already drives.
#pragma once

#include <memory>

#include "redlock/client.h"

struct uv_loop_s;

namespace redlock {

// Creates a client whose connections and timers live on `loop` (a uv_loop_t*).
// Call it on the thread that runs `loop`. Rules in this mode:
//  - *_async calls may come from any thread; their callbacks run on `loop`'s thread.
//  - synchronous calls from `loop`'s thread return errc::would_deadlock; from other
//    threads they block until `loop` has done the work (so `loop` must be running).
//  - ignore or block SIGPIPE on `loop`'s thread (a peer reset during a write
//    raises it there); the client's own loop thread blocks it for you.
//  - destroy the client on `loop`'s thread, then keep running `loop` until
//    uv_run() returns: the client's handles close in their close callbacks.
// Throws config_error for a bad configuration.
REDLOCK_EXPORT std::unique_ptr<client> make_client_on_loop(client_options options, uv_loop_s* loop);

}  // namespace redlock
