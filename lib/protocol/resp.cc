// RESP encoding (resp.h): the bulk-string array writer, and a command's EVALSHA,
// EVAL and SET+TIME forms.
#include "protocol/resp.h"

#include <charconv>
#include <utility>

#include "pure/keys.h"
#include "pure/slot.h"

namespace redlock::detail {

namespace {
void append_resp_array(std::string& out, const std::string_view* argv, std::size_t n) {
  char num[24];
  auto put_len = [&](char prefix, std::size_t len) {
    out.push_back(prefix);
    auto res = std::to_chars(num, num + sizeof num, len);
    out.append(num, res.ptr);
    out.append("\r\n", 2);
  };
  put_len('*', n);
  for (std::size_t i = 0; i < n; ++i) {
    put_len('$', argv[i].size());
    out.append(argv[i].data(), argv[i].size());
    out.append("\r\n", 2);
  }
}
}  // namespace

void append_resp(std::string& out, std::initializer_list<std::string_view> argv) {
  append_resp_array(out, argv.begin(), argv.size());
}

void append_resp(std::string& out, const std::vector<std::string_view>& argv) {
  append_resp_array(out, argv.data(), argv.size());
}

wire::wire(command c) : cmd_(std::move(c)) {
  if (!cmd_.force_eval) sha_ = encode(false);
}

const std::string& wire::eval_form() const {
  if (eval_.empty()) eval_ = encode(true);
  return eval_;
}

const std::string& wire::timed_form() const {
  if (timed_.empty()) {
    timed_ = sha_.empty() ? encode(false) : sha_;
    append_resp(timed_, {"TIME"});
  }
  return timed_;
}

const wire& wire::cluster_form() const {
  if (is_cluster_ || (cmd_.key.empty() && cmd_.keys.empty())) return *this;  // tagged already; no keys
  if (!cluster_) {
    command c = cmd_;
    if (!c.key.empty()) {
      if (!c.key2.empty()) c.key2 = cluster_key(cmd_.key, cmd_.key2);
      c.key = cluster_key(cmd_.key, cmd_.key);
    }
    for (std::string& k : c.keys) k = cluster_key(k, k);
    auto w = std::make_shared<wire>(std::move(c));
    w->is_cluster_ = true;
    cluster_ = std::move(w);
  }
  return *cluster_;
}

int wire::slot() const {
  if (slot_ != -3) return slot_;
  const command& c = cluster_form().cmd_;
  int s = kNoSlot;
  auto see = [&s](const std::string& k) {
    if (k.empty() || s == kCrossSlot) return;
    const int ks = key_slot(k);
    s = (s == kNoSlot || s == ks) ? ks : kCrossSlot;
  };
  see(c.key);
  see(c.key2);
  for (const std::string& k : c.keys) see(k);
  slot_ = s;
  return s;
}

std::string wire::encode(bool with_body) const {
  const redlock::detail::script& sc = get_script(cmd_.script);
  const std::string_view verb = with_body ? "EVAL" : "EVALSHA";
  const std::string_view code = with_body ? std::string_view(sc.body) : std::string_view(sc.sha());
  const std::string_view nkeys = sc.num_keys > 1 ? "2" : "1";
  std::string out;
  out.reserve(64 + code.size() + cmd_.key.size() * 2 + cmd_.arg1.size() + cmd_.arg2.size());
  if (cmd_.script == script_id::ping) {
    append_resp(out, {"PING"});
  } else if (cmd_.script == script_id::acquire_set && !with_body) {
    append_resp(out, {"SET", cmd_.key, cmd_.arg1, "NX", "PX", cmd_.arg2, "GET"});
  } else if (sc.num_keys == 0) {
    // A set script: every key, then the arguments (lib/scripts.h, kAcquireMany ...).
    const std::string count = std::to_string(cmd_.keys.size());
    std::vector<std::string_view> argv{verb, code, count};
    for (const std::string& k : cmd_.keys) argv.push_back(k);
    argv.push_back(cmd_.arg1);
    if (!cmd_.arg2.empty()) argv.push_back(cmd_.arg2);
    append_resp(out, argv);
  } else if (cmd_.script == script_id::inspect) {
    append_resp(out, {verb, code, nkeys, cmd_.key});
  } else if (sc.num_keys > 1) {
    if (cmd_.arg2.empty()) {
      append_resp(out, {verb, code, nkeys, cmd_.key, cmd_.key2, cmd_.arg1});
    } else {
      append_resp(out, {verb, code, nkeys, cmd_.key, cmd_.key2, cmd_.arg1, cmd_.arg2});
    }
  } else if (cmd_.arg2.empty()) {
    append_resp(out, {verb, code, nkeys, cmd_.key, cmd_.arg1});
  } else {
    append_resp(out, {verb, code, nkeys, cmd_.key, cmd_.arg1, cmd_.arg2});
  }
  return out;
}

std::shared_ptr<const wire> plain_wire(std::initializer_list<std::string_view> argv) {
  std::string encoded;
  append_resp(encoded, argv);
  return std::make_shared<const wire>(wire::plain_tag{}, std::move(encoded));
}

}  // namespace redlock::detail
