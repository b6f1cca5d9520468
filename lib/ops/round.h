// One fan-out round: the same script sent to every node in parallel, the answers
// turned into votes, and a decision taken as soon as it is known; its operation
// hears of it through a round_listener.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/endpoint.h"
#include "pure/decision.h"
#include "redlock/report.h"

namespace redlock::detail {

class core;
class round;

// What a round reports to its operation (round::listen). Loop thread.
class round_listener {
 public:
  // Once, when the round is decided. May start other rounds; must not destroy the core.
  virtual void decided(round& r) = 0;
  // Each answer that arrives after the decision (only for a listener kept for them).
  virtual void late(round&, std::size_t /*node*/) {}

 protected:
  ~round_listener() = default;
};

class round final : public sink, public std::enable_shared_from_this<round> {
 public:
  // wait_all: decide only when every node answered (inspect); otherwise decide at
  // quorum or when quorum became impossible. What a refusal means (an acquire's
  // `held`, every other script's `not_owner`) follows from `script`.
  round(core& c, script_id script, bool wait_all);
  ~round() override;

  // Sends `cmd` to every node whose skip[i] is empty (all if `skip` is empty);
  // force_eval[i] sends the script body. Skipped nodes vote `excluded`, with
  // skip[i] as the detail.
  // `cmd` is taken (a caller that keeps no copy moves it in: no string copies).
  void send(command cmd, const std::vector<std::string>& skip = {}, const std::vector<bool>& force_eval = {});
  // For a round of `untimed` commands (no per-request deadline): once `after`
  // has passed without a decision, every node still pending votes `timeout`
  // ("no reply within <what> (<after> ms)"), and the round decides. Call before
  // send(). `what` must outlive the round (a literal).
  void set_deadline(std::chrono::milliseconds after, const char* what);

  // The round reports its decision to `l`. With `late`, it keeps `l` for its
  // whole life and reports each later answer too (the listener, and what it
  // holds, live as long as the round: its requests in flight); without, it drops
  // `l` right after decided(). Call before send().
  void listen(std::shared_ptr<round_listener> l, bool late = false) {
    listener_ = std::move(l);
    hears_late_ = late;
  }

  void on_reply(std::size_t node, std::uint32_t tag, const reply_event& ev) override;

  verdict outcome = verdict::undecided;
  std::chrono::steady_clock::time_point started;  // just before the first send
  std::vector<vote> votes;
  std::vector<node_result> results;
  std::vector<std::optional<std::uint64_t>> fences;
  std::vector<std::optional<std::string>> values;
  std::vector<std::int64_t> pttls;
  // acquire_many: the 1-based index (in command::keys) of the key a node holds for another owner.
  std::vector<std::optional<std::size_t>> blocked_by;
  // The request to this node was never written (reply_event::unsent): the node
  // cannot have run it, so there is nothing to roll back there.
  std::vector<bool> unsent;
  // The node granted (its key IS written), then a guard excluded the vote (the
  // clock-jump guard reading the TIME behind the grant, or the restart guard once
  // a reconnect's handshake showed a new run_id): the vote is `excluded`,
  // but the rollback and the late path must still delete the key there.
  std::vector<bool> granted_excluded;
  // An extension's vote that the clock-jump guard excluded at its reply
  // (reply_event::excluded_by): the node ran the extension on a clock seen to
  // jump, so the key it re-timed may expire as soon as that clock is corrected.
  std::vector<bool> clock_jumped;

 private:
  void evaluate();
  void expire_pending();
  core& core_;
  std::shared_ptr<round_listener> listener_;
  bool hears_late_ = false;
  std::uint64_t deadline_timer_ = 0;
  std::chrono::milliseconds deadline_after_{0};
  const char* deadline_what_ = "";
  refusal refusal_;
  script_id script_;
  bool wait_all_;
  bool sending_ = false;
};

}  // namespace redlock::detail
