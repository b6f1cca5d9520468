// plain_round: start -> one request per node -> on_reply (parse each answer) ->
// maybe_finish (every node answered) -> done(report), exactly once.
#include "ops/plain_round.h"

#include <memory>
#include <string>
#include <utility>

#include "engine/core.h"
#include "ops/async_op.h"
#include "node/connection.h"
#include "protocol/value_of.h"

namespace redlock::detail {
namespace {

// Self-owned through its requests (each holds it as its sink).
class plain_round_op final : public sink, public async_op<plain_round_op, report> {
 public:
  plain_round_op(core& c, plain_parser parse, std::function<void(report)> done)
      : async_op(std::move(done)), core_(c), parse_(std::move(parse)) {
    rep_.attempts = 1;
    for (const auto& n : c.nodes()) rep_.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
  }

  void start(std::initializer_list<std::string_view> argv) {
    std::string out;
    append_resp(out, argv);
    auto w = std::make_shared<const wire>(wire::plain_tag{}, std::move(out));
    started_ = core_.now();
    sending_ = true;
    auto self = keep();
    for (std::size_t i = 0; i < core_.size(); ++i) core_.conn(i).submit(w, false, self, 0);
    sending_ = false;
    maybe_finish();
  }

  void on_reply(std::size_t node, std::uint32_t, const reply_event& ev) override {
    if (node >= rep_.nodes.size()) return;
    node_result& n = rep_.nodes[node];
    ++answered_;
    n.latency = ev.latency;
    if (ev.status != node_status::pending || ev.reply == nullptr) {
      n.status = ev.status == node_status::pending ? node_status::protocol_error : ev.status;
      n.detail = std::string(ev.detail);
    } else if (ev.reply->type == REDIS_REPLY_ERROR) {
      n.status = node_status::server_error;
      n.detail = std::string(ev.reply->str, ev.reply->len);
    } else if (parse_(node, value_of(*ev.reply))) {
      n.status = node_status::ok;
    } else {
      n.status = node_status::protocol_error;
      n.detail = "unexpected reply to an election script";
    }
    maybe_finish();
  }

 private:
  void maybe_finish() {
    if (sending_ || finished() || answered_ < core_.size()) return;
    rep_.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(core_.now() - started_);
    finish(std::move(rep_));
  }

  core& core_;
  plain_parser parse_;
  report rep_;
  std::chrono::steady_clock::time_point started_;
  std::size_t answered_ = 0;
  bool sending_ = false;
};

}  // namespace

void plain_round(core& c, std::initializer_list<std::string_view> argv, plain_parser parse,
                 std::function<void(report)> done) {
  std::make_shared<plain_round_op>(c, std::move(parse), std::move(done))->start(argv);
}

}  // namespace redlock::detail
