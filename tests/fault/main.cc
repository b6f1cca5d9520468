// fault_scenarios: the fault-injection scenarios (docs/safety-harness.md).
//
// The same binary is also the worker process of the multi-process scenarios:
// `fault_scenarios --redlock-worker key=value...` runs one contention client and
// writes its history to a file (see worker_main in fault_util.h).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <cstring>

#include "fault_util.h"

int main(int argc, char** argv) {
  // SIGPIPE is blocked in this thread and so in every thread created after it
  // (the harness's own sockets write from them). The library's loop threads block
  // it themselves: Churn.a_peer_reset_never_kills_the_process_with_sigpipe runs a
  // worker with SIGPIPE unblocked to prove it. Blocked, not ignored: a
  // thread-directed SIGPIPE just stays pending.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  if (argc > 1 && std::strcmp(argv[1], "--redlock-worker") == 0) {
    return redlock::test::worker_main(argc - 2, argv + 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
