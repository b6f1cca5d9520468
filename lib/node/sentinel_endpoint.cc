// A Sentinel node's life: discovery (sentinels in order: SENTINEL
// GET-MASTER-ADDR-BY-NAME) while requests wait -> the master named (a connection to
// it), the waiting requests sent -> each request sent to the master named last,
// through a request_sink that asks a sentinel again when the master fails and
// keeps a grant from counting within a master change's quarantine -> the sentinel
// asked again every second and its +switch-master followed; and shutdown, which
// cancels what is left. Loop thread only.
#include "node/sentinel_endpoint.h"

#include <algorithm>
#include <utility>

#include "protocol/info.h"
#include "protocol/scripts.h"
#include "protocol/sentinel.h"

namespace redlock::detail {
namespace {

bool is_error_with(const reply_event& ev, std::string_view prefix) {
  return ev.status == node_status::pending && ev.reply != nullptr && ev.reply->type == REDIS_REPLY_ERROR &&
         std::string_view(ev.reply->str, ev.reply->len).substr(0, prefix.size()) == prefix;
}

// A query's minimum spacing when a failure asks for one at once.
constexpr std::uint64_t kAskSoonMs = 100;

}  // namespace

// A sentinel link's listener: a subscriber's +switch-master messages, and its
// SUBSCRIBE sent again on every handshake. A query link has one too (a push
// listener makes a connection non-voting: PING only, no guard), which hears nothing.
class sentinel_endpoint::listener final : public push_listener {
 public:
  listener(sentinel_endpoint& ep, std::size_t sentinel, bool subscriber)
      : ep_(ep), sentinel_(sentinel), subscriber_(subscriber) {}
  void on_push(std::size_t, const redisReply& message) override {
    if (subscriber_) ep_.on_switch_message(message);
  }
  void on_sub_ready(std::size_t) override {
    if (!subscriber_ || ep_.state_ == state::closed) return;
    connection& c = *ep_.sentinel_links_[sentinel_].subscriber;
    c.submit(ep_.subscribe_wire_, false, std::make_shared<discard_sink>(), 0);
  }
  void on_sub_down(std::size_t) override {}

 private:
  sentinel_endpoint& ep_;
  std::size_t sentinel_;
  bool subscriber_;
};

// Between the master's connection and the request's sink.
class sentinel_endpoint::request_sink final : public sink {
 public:
  request_sink(sentinel_endpoint& ep, std::shared_ptr<sink> target, const connection* via, script_id script)
      : ep_(ep), target_(std::move(target)), via_(via), acquire_(acquires(script)), extend_(extends(script)) {}

  void on_reply(std::size_t, std::uint32_t tag, const reply_event& ev) override {
    // A dead, stalled or demoted master, or one whose replicas dropped (a failover?):
    // ask a sentinel now, not at the next poll.
    if (ev.status == node_status::connection_error || ev.status == node_status::timeout ||
        is_error_with(ev, "READONLY") || ev.unreplicated) {
      ep_.ask_soon();
    }
    if ((acquire_ || extend_) && ev.status == node_status::pending && ev.excluded_by.empty()) {
      // An extension on a master Sentinel no longer names would move an expiry the
      // promoted master does not share; an acquire also waits out a master change.
      if (const std::string why = ep_.grant_exclusion(via_, acquire_); !why.empty()) {
        reply_event e = ev;
        e.excluded_by = why;
        return target_->on_reply(ep_.index_, tag, e);
      }
    }
    target_->on_reply(ep_.index_, tag, ev);
  }

 private:
  sentinel_endpoint& ep_;
  std::shared_ptr<sink> target_;
  const connection* via_;
  bool acquire_;
  bool extend_;
};

// SENTINEL GET-MASTER-ADDR-BY-NAME's answer.
class sentinel_endpoint::answer_sink final : public sink {
 public:
  answer_sink(sentinel_endpoint& ep, std::size_t sentinel, std::uint64_t asked_ms)
      : ep_(ep), sentinel_(sentinel), asked_ms_(asked_ms) {}
  void on_reply(std::size_t, std::uint32_t, const reply_event& ev) override {
    ep_.on_answer(sentinel_, asked_ms_, ev);
  }

 private:
  sentinel_endpoint& ep_;
  std::size_t sentinel_;
  std::uint64_t asked_ms_;
};

sentinel_endpoint::sentinel_links::sentinel_links() = default;
sentinel_endpoint::sentinel_links::~sentinel_links() = default;
sentinel_endpoint::sentinel_links::sentinel_links(sentinel_links&&) noexcept = default;
sentinel_endpoint::sentinel_links& sentinel_endpoint::sentinel_links::operator=(sentinel_links&&) noexcept =
    default;

sentinel_endpoint::sentinel_endpoint(node_host& host, std::size_t index, node_address address, bool confirm)
    : host_(host),
      index_(index),
      address_(std::move(address)),
      confirm_(confirm),
      waiting_(host, index, "the master Sentinel names for '" + address_.master_name + "'",
               [this] { return errors_; }),
      ask_wire_(plain_wire({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", address_.master_name})),
      subscribe_wire_(plain_wire({"SUBSCRIBE", "+switch-master"})),
      peers_wire_(plain_wire({"SENTINEL", "SENTINELS", address_.master_name})),
      master_info_wire_(plain_wire({"SENTINEL", "MASTER", address_.master_name})) {
  sentinels_.push_back(host_port{address_.host, address_.port});
  sentinels_.insert(sentinels_.end(), address_.seeds.begin(), address_.seeds.end());
  // Room for the sentinels discovered later, reserved once: the vectors never
  // reallocate (listeners and sinks refer to entries by index, and no reference
  // taken in a callback is left dangling).
  max_sentinels_ = std::max(sentinels_.size(), kMaxSentinels);
  sentinels_.reserve(max_sentinels_);
  sentinel_links_.reserve(max_sentinels_);
  sentinel_links_.resize(sentinels_.size());
}

sentinel_endpoint::~sentinel_endpoint() = default;

std::string sentinel_endpoint::sentinel_text(std::size_t sentinel) const {
  return "sentinel " + host_port_text(sentinels_[sentinel].host, sentinels_[sentinel].port);
}

std::unique_ptr<connection> sentinel_endpoint::sentinel_link(std::size_t sentinel, bool subscriber) {
  // Plain TCP, no AUTH, database 0: the URI's TLS and credentials are the master's.
  node_address a;
  a.host = sentinels_[sentinel].host;
  a.port = sentinels_[sentinel].port;
  a.display = address_.display + " (" + sentinel_text(sentinel) + (subscriber ? ", +switch-master)" : ")");
  sentinel_links& l = sentinel_links_[sentinel];
  std::unique_ptr<listener>& heard = subscriber ? l.subscriber_listener : l.query_listener;
  heard = std::make_unique<listener>(*this, sentinel, subscriber);
  auto c = std::make_unique<connection>(host_, index_, a);
  c->set_push_listener(heard.get());
  c->set_no_auth();
  c->start();
  return c;
}

connection& sentinel_endpoint::query_link(std::size_t sentinel) {
  sentinel_links& l = sentinel_links_[sentinel];
  if (!l.query) l.query = sentinel_link(sentinel, false);
  return *l.query;
}

void sentinel_endpoint::subscribe_at(std::size_t sentinel) {
  sentinel_links& l = sentinel_links_[sentinel];
  if (!l.subscriber && !host_.closing()) l.subscriber = sentinel_link(sentinel, true);
}

namespace {

// The address of the master at `at`, with the node URI's user, password, TLS and database.
node_address as_master(node_address a, const host_port& at) {
  a.type = node_address::kind::tcp;
  a.topology = node_address::deployment::standalone;
  a.seeds.clear();
  a.master_name.clear();
  a.host = at.host;
  a.port = at.port;
  a.display += " (master " + host_port_text(at.host, at.port) + ")";
  return a;
}

}  // namespace

const sentinel_endpoint::link* sentinel_endpoint::find_link(const host_port& at) const noexcept {
  for (const link& l : masters_) {
    if (l.host == at.host && l.port == at.port) return &l;
  }
  return nullptr;
}

const sentinel_endpoint::link* sentinel_endpoint::current_link() const noexcept {
  for (const link& l : masters_) {
    if (l.conn.get() == master_) return &l;
  }
  return nullptr;
}

connection& sentinel_endpoint::master_link(const host_port& at) {
  if (const link* known = find_link(at)) return *known->conn;
  masters_.push_back(link{at.host, at.port, std::make_unique<connection>(host_, index_, as_master(address_, at))});
  connection& c = *masters_.back().conn;
  // A failover inside the group must not lose a counted grant: the master's writes
  // count once its replicas have them (WAIT), and no write of a server that is not
  // a master does, whatever a sentinel said (docs/design.md, plan item 4).
  c.set_confirm_replication(confirm_);
  if (state_ != state::closed) c.start();
  return c;
}

void sentinel_endpoint::start() {
  if (state_ != state::idle) return;
  started_ms_ = host_.now_ms();
  state_ = state::discovering;
  tried_ = 0;
  ask(0);
}

void sentinel_endpoint::ask(std::size_t sentinel) {
  asking_ = true;
  ++tried_;
  current_ = sentinel;
  last_ask_ms_ = host_.now_ms();
  // A link in backoff answers at once (through on_answer), which may ask the next.
  query_link(sentinel).submit(ask_wire_, false, std::make_shared<answer_sink>(*this, sentinel, last_ask_ms_), 0);
}

void sentinel_endpoint::on_answer(std::size_t sentinel, std::uint64_t asked_ms, const reply_event& ev) {
  asking_ = false;
  if (state_ == state::closed) return;
  std::string why;
  if (ev.status != node_status::pending) {
    why = std::string(to_string(ev.status)) + ": " + std::string(ev.detail);
  } else if (ev.reply == nullptr) {
    why = "no reply";
  } else if (ev.reply->type == REDIS_REPLY_ERROR) {
    why = "refused SENTINEL GET-MASTER-ADDR-BY-NAME: " + first_line(ev.reply->str, ev.reply->len);
  } else if (const auto m = parse_master_addr(ev.reply); !m) {
    why = "answered SENTINEL GET-MASTER-ADDR-BY-NAME with something else than an address";
  } else if (!m->known) {
    why = "monitors no master named '" + address_.master_name + "'";
  } else {
    errors_.clear();
    tried_ = 0;
    subscribe_at(sentinel);
    // The group's other sentinels and its failover-timeout, from this one: at the
    // first answer, then once a minute (a sentinel added to the group, or the URI
    // listing only one; a failover-timeout changed).
    const std::uint64_t now = host_.now_ms();
    if (!peers_asked_ || now - peers_asked_ms_ >= kPeersIntervalMs) {
      peers_asked_ = true;
      peers_asked_ms_ = now;
      query_link(sentinel).submit(peers_wire_, false, reply_fn([this](const reply_event& e) { on_peers(e); }), 0);
    }
    return use_master(m->address, sentinel_text(sentinel), asked_ms);
  }
  if (!errors_.empty()) errors_ += "; ";
  errors_ += sentinel_text(sentinel) + ": " + why;
  if (tried_ < sentinels_.size()) return ask((sentinel + 1) % sentinels_.size());
  tried_ = 0;
  if (state_ == state::discovering) return discovery_failed();
  // The master known stays in use (its connection reconnects by itself); the next
  // poll asks again.
  errors_.clear();
}

void sentinel_endpoint::on_peers(const reply_event& ev) {
  if (state_ == state::closed) return;
  // A refusal (a proxy, an ACL), or another shape: the sentinels known stay as they are.
  const auto peers = ev.status == node_status::pending && ev.reply != nullptr
                         ? parse_sentinels(ev.reply, max_sentinels_)
                         : std::nullopt;
  for (const host_port& p : peers ? *peers : std::vector<host_port>{}) {
    if (sentinels_.size() >= max_sentinels_) break;
    const bool known = std::any_of(sentinels_.begin(), sentinels_.end(),
                                   [&](const host_port& s) { return s.host == p.host && s.port == p.port; });
    if (known) continue;
    // Asked in turn after the URI's, when one fails; its links are made on first need.
    sentinels_.push_back(p);
    sentinel_links_.emplace_back();
  }
  // Every known sentinel's failover-timeout (settle_ms): any of them may lead a
  // failover, with its own.
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    query_link(i).submit(master_info_wire_, false,
                         reply_fn([this, i](const reply_event& e) { on_master_info(i, e); }), 0);
  }
}

void sentinel_endpoint::on_master_info(std::size_t sentinel, const reply_event& ev) {
  if (state_ == state::closed || ev.status != node_status::pending || sentinel >= sentinel_links_.size()) return;
  // A refusal (an ACL without SENTINEL MASTER), or another shape: as it was.
  const auto timeout = parse_failover_timeout(ev.reply);
  if (!timeout) return;
  // Its latest answer (SENTINEL SET may have changed it); settle_ms takes the largest.
  sentinel_links_[sentinel].failover_timeout_ms = *timeout;
}

std::uint64_t sentinel_endpoint::settle_ms() const noexcept {
  std::uint64_t longest = 0;
  for (const sentinel_links& l : sentinel_links_) {
    // One that has not told its own: it may lead with Sentinel's default.
    longest = std::max(longest, l.failover_timeout_ms.value_or(kDefaultFailoverTimeoutMs));
  }
  return (sentinel_links_.empty() ? kDefaultFailoverTimeoutMs : longest) + kSettleMarginMs;
}

void sentinel_endpoint::use_master(const host_port& at, const std::string& how, std::uint64_t asked_ms) {
  if (state_ == state::closed) return;
  if (find_link(at) == nullptr && masters_.size() >= kMaxMasters) return;  // the master known stays in use
  connection* before = master_;
  connection& c = master_link(at);
  master_ = &c;
  // Named master by a sentinel asked at asked_ms: a drop of its replicas seen
  // settle_ms() or more before that no longer holds its writes back
  // (connection::confirm_master).
  c.confirm_master(asked_ms, settle_ms());
  if (before != nullptr && before != &c) {
    master_changed_at_ = host_.now();
    master_change_ = "the master of '" + address_.master_name + "' changed: " + how + " names " +
                     host_port_text(at.host, at.port) + " now (a failover?); no acquire vote for " +
                     std::to_string(host_.restart_quarantine().count()) + " ms from when this client saw it";
  }
  if (state_ == state::ready) return;
  state_ = state::ready;
  failures_ = 0;
  for (waiting_requests::entry& r : waiting_.take_all()) submit(std::move(r.w), r.force_eval, std::move(r.target), r.tag);
  arm_poll();
  host_.note_quiet();
}

void sentinel_endpoint::on_switch_message(const redisReply& message) {
  if (message.elements != 3 || message.element[2]->type != REDIS_REPLY_STRING) return;
  const std::string_view channel(message.element[1]->str, message.element[1]->len);
  if (channel != "+switch-master") return;
  const auto sw = parse_switch_master(std::string_view(message.element[2]->str, message.element[2]->len));
  if (!sw || sw->name != address_.master_name) return;
  use_master(sw->to, "+switch-master", host_.now_ms());
}

void sentinel_endpoint::discovery_failed() {
  state_ = state::down;
  down_detail_ = "no sentinel named the master of '" + address_.master_name + "' (" + errors_ + ")";
  errors_.clear();
  ++failures_;
  waiting_.fail_all(node_status::connection_error, down_detail_);
  retry_timer_ = schedule_rediscovery(host_, failures_, [this] {
    retry_timer_ = 0;
    if (state_ != state::down) return;
    state_ = state::discovering;
    tried_ = 0;
    ask(0);
  });
  host_.note_quiet();
}

void sentinel_endpoint::arm_poll() {
  if (poll_timer_ != 0 || host_.closing()) return;
  poll_timer_ = host_.schedule(kPollInterval, [this] {
    poll_timer_ = 0;
    if (state_ != state::ready) return;
    if (!asking_) {
      tried_ = 0;
      ask(current_);
    }
    arm_poll();
  });
}

void sentinel_endpoint::ask_soon() {
  if (state_ != state::ready || asking_ || host_.now_ms() - last_ask_ms_ < kAskSoonMs) return;
  tried_ = 0;
  ask(current_);
}

std::string sentinel_endpoint::grant_exclusion(const connection* c, bool acquire) const {
  if (c != master_) {
    for (const link& l : masters_) {
      if (l.conn.get() != c) continue;
      return "granted by " + host_port_text(l.host, l.port) + ", which Sentinel no longer names master of '" +
             address_.master_name + "'";
    }
  }
  return acquire && master_change_quarantined() ? master_change_ : std::string();
}

bool sentinel_endpoint::master_change_quarantined() const noexcept {
  const auto q = host_.restart_quarantine();
  return master_changed_at_ && q.count() > 0 && host_.now() - *master_changed_at_ < q;
}

void sentinel_endpoint::submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
                               std::uint32_t tag) {
  switch (state_) {
    case state::ready: {
      const script_id script = w->script();
      return master_->submit(std::move(w), force_eval,
                             std::make_shared<request_sink>(*this, std::move(s), master_, script), tag);
    }
    case state::closed:
      return fail_unsent(*s, index_, tag, node_status::cancelled, "client shut down");
    case state::down:
      return fail_unsent(*s, index_, tag, node_status::connection_error, down_detail_);
    case state::idle:
    case state::discovering:
      break;
  }
  waiting_.add(std::move(w), force_eval, std::move(s), tag, failures_ == 0, started_ms_);
}

void sentinel_endpoint::flush() {
  for (std::size_t i = 0; i < masters_.size(); ++i) masters_[i].conn->flush();
  for (sentinel_links& l : sentinel_links_) {
    if (l.query) l.query->flush();
    if (l.subscriber) l.subscriber->flush();
  }
}

bool sentinel_endpoint::quiet() const noexcept {
  if (!waiting_.empty()) return false;
  for (const link& l : masters_) {
    if (!l.conn->quiet()) return false;
  }
  for (const sentinel_links& l : sentinel_links_) {
    if (l.query && !l.query->quiet()) return false;
  }
  return true;
}

void sentinel_endpoint::shutdown() {
  state_ = state::closed;
  if (retry_timer_ != 0) host_.cancel_timer(retry_timer_);
  if (poll_timer_ != 0) host_.cancel_timer(poll_timer_);
  retry_timer_ = poll_timer_ = 0;
  waiting_.fail_all(node_status::cancelled, "client shut down");
  for (std::size_t i = 0; i < masters_.size(); ++i) masters_[i].conn->shutdown();
  for (sentinel_links& l : sentinel_links_) {
    if (l.query) l.query->shutdown();
    if (l.subscriber) l.subscriber->shutdown();
  }
}

std::string sentinel_endpoint::acquire_exclusion(std::chrono::steady_clock::time_point now,
                                                 std::chrono::milliseconds quarantine) const {
  if (master_changed_at_ && quarantine.count() > 0 && now - *master_changed_at_ < quarantine) {
    return master_change_;
  }
  return master_ == nullptr ? std::string() : master_->acquire_exclusion(now, quarantine);
}

std::string sentinel_endpoint::fencing_exclusion() const {
  return master_ == nullptr ? std::string() : master_->fencing_exclusion();
}

const std::string& sentinel_endpoint::run_id() const noexcept {
  return master_ == nullptr ? empty_ : master_->run_id();
}

const std::string& sentinel_endpoint::maxmemory_policy() const noexcept {
  return master_ == nullptr ? empty_ : master_->maxmemory_policy();
}

const std::string& sentinel_endpoint::maxmemory() const noexcept {
  return master_ == nullptr ? empty_ : master_->maxmemory();
}

const std::optional<std::chrono::steady_clock::time_point>& sentinel_endpoint::restarted_at() const noexcept {
  return master_ == nullptr ? none_ : master_->restarted_at();
}

const std::optional<std::chrono::steady_clock::time_point>& sentinel_endpoint::jumped_at() const noexcept {
  return master_ == nullptr ? none_ : master_->jumped_at();
}

std::vector<deployment_member> sentinel_endpoint::members() const {
  std::vector<deployment_member> out;
  if (const link* l = current_link()) {
    deployment_member d;
    d.role = "master";
    d.address = host_port_text(l->host, l->port);
    d.connected = master_->ready();
    d.replicas = master_->replicas();
    out.push_back(std::move(d));
  }
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    deployment_member d;
    d.role = "sentinel";
    d.address = host_port_text(sentinels_[i].host, sentinels_[i].port);
    d.connected = sentinel_links_[i].query && sentinel_links_[i].query->ready();
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<node_address> sentinel_endpoint::subscriber_address(const node_address& configured,
                                                                  const std::string&) const {
  const link* l = current_link();
  if (l == nullptr) return std::nullopt;
  return as_master(configured, host_port{l->host, l->port});
}

bool sentinel_endpoint::hears_releases_at(const std::string& host, int port) const {
  const link* l = current_link();
  return l == nullptr || (l->host == host && l->port == port);
}

}  // namespace redlock::detail
