// RESP out: a script call (command), its encodings shared by every node of a round
// (wire), and the RESP array writer every request goes through (append_resp). No I/O.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/scripts.h"

namespace redlock::detail {

// A script call, the same for every node of a round.
struct command {
  script_id script = script_id::release;
  std::string key;
  std::string key2;  // second key for scripts with two keys
  std::vector<std::string> keys;  // every key, for the set scripts (num_keys 0); `key` unused
  std::string arg1;
  std::string arg2;
  bool force_eval = false;  // send the script body (EVAL), not EVALSHA
  // No per-request deadline (command_timeout does not apply): for rounds that set
  // their own (round::set_deadline). The stall detector still applies.
  bool untimed = false;
};

// A command encoded once per round and shared by every node's request: the
// EVALSHA form, and the EVAL form (encoded on first need).
class wire {
 public:
  explicit wire(command c);
  // A plain command, not a script: `encoded` is its RESP form, sent as is (probe:
  // INFO). Its replies are delivered like a PING's.
  struct plain_tag {};
  wire(plain_tag, std::string encoded) : sha_(encoded), eval_(std::move(encoded)) { cmd_.script = script_id::ping; }
  script_id script() const noexcept { return cmd_.script; }
  bool force_eval() const noexcept { return cmd_.force_eval; }
  bool untimed() const noexcept { return cmd_.untimed; }
  const std::string& sha_form() const noexcept { return sha_; }
  const std::string& eval_form() const;  // loop thread only
  // acquire_set only: the plain SET followed by a pipelined TIME (two replies),
  // the clock-jump guard's sample for the node (encoded on first need).
  const std::string& timed_form() const;  // loop thread only

  // The same command as a Redis Cluster node gets it (encoded on first need, then
  // shared by every cluster node of the round): each key in its resource's hash
  // tag (pure/keys.h cluster_key: "{L}", "{L}:fence", ...). A wire without keys
  // (PING, a plain command) is its own cluster form. Loop thread only.
  const wire& cluster_form() const;
  // The hash slot of the cluster form's keys: 0..16383; kNoSlot for a wire without
  // keys; kCrossSlot when its keys hash to different slots (a set whose resources
  // do not share a tag: a cluster node cannot run it). Loop thread only.
  static constexpr int kNoSlot = -1;
  static constexpr int kCrossSlot = -2;
  int slot() const;

 private:
  std::string encode(bool with_body) const;
  command cmd_;
  std::string sha_;
  mutable std::string eval_;
  mutable std::string timed_;
  mutable std::shared_ptr<const wire> cluster_;  // the cluster form, when it differs
  mutable int slot_ = -3;                        // computed on first need (-3: not yet)
  bool is_cluster_ = false;                      // this is a cluster form
};

// Appends a RESP array of bulk strings.
void append_resp(std::string& out, std::initializer_list<std::string_view> argv);
void append_resp(std::string& out, const std::vector<std::string_view>& argv);

// A plain command (wire::plain_tag) of bulk strings, encoded once.
std::shared_ptr<const wire> plain_wire(std::initializer_list<std::string_view> argv);

}  // namespace redlock::detail
