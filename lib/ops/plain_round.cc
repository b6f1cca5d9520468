// plain_round (a plain fan-out, ops/fan_out.h): start -> one request per node ->
// answer (parse each one) -> result (every node answered) -> done(report), once.
#include "ops/plain_round.h"

#include <memory>
#include <string>
#include <utility>

#include "engine/core.h"
#include "node/endpoint.h"
#include "ops/fan_out.h"
#include "protocol/value_of.h"

namespace redlock::detail {
namespace {

// One command to every node (the plain fan-out), each answer parsed into the
// node's result.
class plain_round_op final : public fan_out<report> {
 public:
  plain_round_op(core& c, plain_parser parse, std::function<void(report)> done)
      : fan_out(c, std::move(done)), parse_(std::move(parse)) {
    rep_.attempts = 1;
    for (const auto& n : c.nodes()) rep_.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
  }

  void start(std::initializer_list<std::string_view> argv) {
    std::string out;
    append_resp(out, argv);
    fan_out::start({std::make_shared<const wire>(wire::plain_tag{}, std::move(out))});
  }

 private:
  void answer(std::size_t node, std::uint32_t, const reply_event& ev) override {
    node_result& n = rep_.nodes[node];
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
  }

  report result() override {
    rep_.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(core_.now() - started());
    return std::move(rep_);
  }

  plain_parser parse_;
  report rep_;
};

}  // namespace

void plain_round(core& c, std::initializer_list<std::string_view> argv, plain_parser parse,
                 std::function<void(report)> done) {
  std::make_shared<plain_round_op>(c, std::move(parse), std::move(done))->start(argv);
}

}  // namespace redlock::detail
