// The plain fan-out (ops/plain_round.cc, ops/probe.cc): the same requests sent to
// every node, every answer collected, one result once every node answered every
// request (no votes, no quorum, no rollback: not a lock script's round).
// Lifecycle: start (node by node, each node's requests in order, pipelined) ->
// answer (per reply) -> result (once all are in) -> done(result), exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <utility>

#include "engine/core.h"
#include "node/endpoint.h"
#include "ops/async_op.h"

namespace redlock::detail {

// Self-owned through its requests in flight (each holds it as its sink). A derived
// operation says what each answer means (answer) and what they amount to (result).
// Loop thread only.
template <class Result>
class fan_out : public sink, public async_op<fan_out<Result>, Result> {
 public:
  void on_reply(std::size_t node, std::uint32_t tag, const reply_event& ev) final {
    if (node >= core_.size() || tag >= per_node_) return;
    ++answered_;
    answer(node, tag, ev);
    maybe_finish();
  }

 protected:
  fan_out(core& c, std::function<void(Result)> done) : async_op<fan_out, Result>(std::move(done)), core_(c) {}

  // Sends requests[t], tagged t, to every node: node 0's in order, then node 1's,
  // ... (each request bounded by command_timeout). Once, on an operation made as
  // a shared_ptr. An answer that comes at once (a node down) is counted, and the
  // result delivered after the last send at the earliest.
  void start(std::initializer_list<std::shared_ptr<const wire>> requests) {
    per_node_ = requests.size();
    started_ = core_.now();
    sending_ = true;
    auto self = this->keep();
    for (std::size_t i = 0; i < core_.size(); ++i) {
      std::uint32_t tag = 0;
      for (const auto& w : requests) core_.node(i).submit(w, false, self, tag++);
    }
    sending_ = false;
    maybe_finish();
  }

  // One reply (or the connection's failure) to request `tag` on `node`, valid
  // during the call.
  virtual void answer(std::size_t node, std::uint32_t tag, const reply_event& ev) = 0;
  // What the answers amount to: called once, when every node answered every request.
  virtual Result result() = 0;

  // Read just before the first send.
  std::chrono::steady_clock::time_point started() const { return started_; }

  core& core_;

 private:
  void maybe_finish() {
    if (sending_ || this->finished() || answered_ < core_.size() * per_node_) return;
    this->finish(result());
  }

  std::chrono::steady_clock::time_point started_;
  std::size_t per_node_ = 0;
  std::size_t answered_ = 0;
  bool sending_ = false;
};

}  // namespace redlock::detail
