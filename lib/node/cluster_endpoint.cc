// A cluster node's life: discovery (seeds in order: CLUSTER SHARDS, else CLUSTER
// SLOTS) while requests wait -> the map installed (a connection per shard master),
// the waiting requests routed -> each request sent in its cluster form to its
// slot's master, its redirects followed by its request_sink -> a MOVED updates the
// slot and refreshes the map in the background; and shutdown, which cancels what
// is left. Loop thread only.
#include "node/cluster_endpoint.h"

#include <algorithm>
#include <utility>

#include "protocol/info.h"
#include "protocol/scripts.h"
#include "pure/slot.h"

namespace redlock::detail {
namespace {

// Why a grant through ASK does not count (request_sink).
constexpr const char* kAskedGrant =
    "granted through ASK on the importing node of a slot migration: a failover of the slot's source shard "
    "would hide it, so it does not count until the slot has moved";

// A map refresh after a MOVED: at most this often.
constexpr std::uint64_t kRefreshIntervalMs = 1000;

}  // namespace

// Between a shard's connection and the request's sink: follows redirects, and
// delivers the one reply_event the sink gets.
class cluster_endpoint::request_sink final : public sink, public std::enable_shared_from_this<request_sink> {
 public:
  request_sink(cluster_endpoint& ep, std::shared_ptr<const wire> w, bool force_eval,
               std::shared_ptr<sink> target, std::uint32_t tag, std::string via_host)
      : ep_(ep),
        w_(std::move(w)),
        force_eval_(force_eval),
        target_(std::move(target)),
        tag_(tag),
        via_host_(std::move(via_host)),
        submitted_(ep.host_.now()) {}

  void on_reply(std::size_t, std::uint32_t, const reply_event& ev) override {
    if (ev.status == node_status::pending && ev.reply != nullptr && ev.reply->type == REDIS_REPLY_ERROR &&
        redirects_ < kMaxRedirects) {
      if (const auto to = parse_redirect(std::string_view(ev.reply->str, ev.reply->len))) {
        if (ep_.follow(*this, *to)) return;
      }
    }
    std::shared_ptr<sink> target = std::move(target_);
    if (!target) return;
    // A dead or stalled master, or one whose replicas dropped (a failover?): the map
    // is asked again.
    if (ev.status == node_status::connection_error || ev.status == node_status::timeout || ev.unreplicated) {
      ep_.refresh_after_failure(via_host_, via_port_);
    }
    // A grant from a node whose shard's master changed (this request was sent there
    // by a MOVED to a node no map named a master, or it arrives within a master
    // change's quarantine) does not count (plan item 5).
    // Nor does one an ASK sent to a slot's importing node (a reshard in progress):
    // the migration is the source master's own state, not replicated, so a failover
    // of the source shard before the slot's SETSLOT NODE leaves a promoted owner that
    // never asks the importing node, and the confirmed grant there is invisible to
    // the next acquire (adversarial pass, stop 34). It is rolled back like any
    // excluded grant; the resource can be acquired on this node once the slot moved.
    // (An extension through ASK still counts: the key is the holder's already.)
    const bool acquire = ev.status == node_status::pending && ev.excluded_by.empty() && acquires(w_->script());
    const bool exclude = acquire && (moved_to_new_master_ || asked_ || ep_.master_change_quarantined());
    if (redirects_ == 0 && !exclude) {
      target->on_reply(ep_.index_, tag_, ev);
      return;
    }
    reply_event e = ev;
    // Redirected: the latency counts from the first submission.
    if (redirects_ > 0 && ev.status == node_status::pending) {
      e.latency = std::chrono::duration_cast<std::chrono::microseconds>(ep_.host_.now() - submitted_);
    }
    if (exclude) {
      // (excluded_by is a view: of the endpoint's string, or of a literal.)
      e.excluded_by = asked_ && !moved_to_new_master_ && !ep_.master_change_quarantined()
                          ? std::string_view(kAskedGrant)
                          : std::string_view(ep_.master_change_);
    }
    target->on_reply(ep_.index_, tag_, e);
  }

  // The command as its slot's master gets it (the original wire kept alive).
  std::shared_ptr<const wire> form() const { return std::shared_ptr<const wire>(w_, &w_->cluster_form()); }

  cluster_endpoint& ep_;
  std::shared_ptr<const wire> w_;
  bool force_eval_;
  std::shared_ptr<sink> target_;
  std::uint32_t tag_;
  std::string via_host_;  // the host the request was last sent to (a redirect without a host means it)
  int via_port_ = 0;      // and its port
  std::chrono::steady_clock::time_point submitted_;
  int redirects_ = 0;
  bool asked_ = false;
  bool moved_to_new_master_ = false;  // a MOVED sent it to a node no map named a master
};

// A map request's reply (CLUSTER SHARDS, then CLUSTER SLOTS when refused).
class cluster_endpoint::map_sink final : public sink {
 public:
  map_sink(cluster_endpoint& ep, connection& via, std::string via_host, bool shards, bool refresh,
           std::size_t seed)
      : ep_(ep),
        via_(via),
        via_host_(std::move(via_host)),
        shards_(shards),
        refresh_(refresh),
        seed_(seed),
        asked_ms_(ep.host_.now_ms()) {}
  void on_reply(std::size_t, std::uint32_t, const reply_event& ev) override {
    ep_.on_map_reply(refresh_, seed_, via_host_, ev, shards_, via_, asked_ms_);
  }

 private:
  cluster_endpoint& ep_;
  connection& via_;
  std::string via_host_;
  bool shards_;
  bool refresh_;
  std::size_t seed_;
  std::uint64_t asked_ms_;  // when the map was asked (now_ms)
};

cluster_endpoint::cluster_endpoint(node_host& host, std::size_t index, node_address address, bool confirm)
    : host_(host),
      index_(index),
      address_(std::move(address)),
      confirm_(confirm),
      waiting_(host, index, "cluster slot map", [this] { return discovery_errors_; }),
      shards_wire_(plain_wire({"CLUSTER", "SHARDS"})),
      slots_wire_(plain_wire({"CLUSTER", "SLOTS"})),
      asking_wire_(plain_wire({"ASKING"})),
      node_timeout_wire_(plain_wire({"CONFIG", "GET", "cluster-node-timeout"})) {
  seeds_.push_back(host_port{address_.host, address_.port});
  seeds_.insert(seeds_.end(), address_.seeds.begin(), address_.seeds.end());
}

cluster_endpoint::~cluster_endpoint() = default;

connection& cluster_endpoint::connection_to(const std::string& host, int port) {
  for (const shard_link& l : links_) {
    if (l.host == host && l.port == port) return *l.conn;
  }
  // The cluster URI's user, password and TLS; database 0, as in every cluster.
  node_address a = address_;
  a.type = node_address::kind::tcp;
  a.topology = node_address::deployment::standalone;
  a.seeds.clear();
  a.master_name.clear();
  a.host = host;
  a.port = port;
  a.db = 0;
  a.display = address_.display + " (cluster node " + host_port_text(host, port) + ")";
  links_.push_back(shard_link{host, port, std::make_unique<connection>(host_, index_, std::move(a))});
  connection& c = *links_.back().conn;
  // A failover inside the cluster must not lose a counted grant: a shard master's
  // writes count once its replicas have them (WAIT), and a replica's never do
  // (connection::set_confirm_replication; docs/design.md, plan item 4).
  c.set_confirm_replication(confirm_);
  if (state_ != state::closed) c.start();
  return c;
}

const cluster_endpoint::shard_link& cluster_endpoint::link_of(const connection* c) const {
  for (const shard_link& l : links_) {
    if (l.conn.get() == c) return l;
  }
  return links_.front();  // not reached: every connection here is in links_
}

void cluster_endpoint::start() {
  if (state_ != state::idle) return;
  started_ms_ = host_.now_ms();
  ask_seed(0);
}

void cluster_endpoint::ask_seed(std::size_t seed) {
  state_ = state::discovering;
  const host_port& s = seeds_[seed];
  ask_map(connection_to(s.host, s.port), s.host, true, false, seed);
}

void cluster_endpoint::ask_map(connection& via, const std::string& via_host, bool shards, bool refresh,
                               std::size_t seed) {
  via.submit(shards ? shards_wire_ : slots_wire_, false,
             std::make_shared<map_sink>(*this, via, via_host, shards, refresh, seed), 0);
}

void cluster_endpoint::on_map_reply(bool refresh, std::size_t seed, const std::string& via_host,
                                    const reply_event& ev, bool shards, connection& via, std::uint64_t asked_ms) {
  if (state_ == state::closed) return;
  std::string why;
  if (ev.status != node_status::pending) {
    why = std::string(to_string(ev.status)) + ": " + std::string(ev.detail);
  } else if (ev.reply == nullptr) {
    why = "no reply";
  } else if (ev.reply->type == REDIS_REPLY_ERROR && shards) {
    // Before 7.0 CLUSTER SHARDS is an unknown subcommand: ask CLUSTER SLOTS.
    return ask_map(via, via_host, false, refresh, seed);
  } else if (ev.reply->type == REDIS_REPLY_ERROR) {
    why = "CLUSTER SLOTS refused: " + first_line(ev.reply->str, ev.reply->len);
  } else {
    slot_map map;
    std::string error;
    const bool parsed = shards ? parse_cluster_shards(ev.reply, via_host, map, error)
                               : parse_cluster_slots(ev.reply, via_host, map, error);
    if (parsed && install(map, error, asked_ms, via)) {
      ask_node_timeout(via);
      if (refresh) {
        refreshing_ = false;
        return;
      }
      state_ = state::ready;
      failures_ = 0;
      discovery_errors_.clear();
      // The requests that waited for the map, in submission order.
      for (waiting_requests::entry& r : waiting_.take_all()) route(std::move(r.w), r.force_eval, std::move(r.target), r.tag);
      host_.note_quiet();
      return;
    }
    why = error;
  }
  if (refresh) {
    refreshing_ = false;  // the map stays as it was
    return;
  }
  discovery_failed(seed, std::move(why));
}

void cluster_endpoint::ask_node_timeout(connection& via) {
  const std::uint64_t now = host_.now_ms();
  if (node_timeout_asked_ && now - node_timeout_asked_ms_ < kNodeTimeoutIntervalMs) return;
  node_timeout_asked_ = true;
  node_timeout_asked_ms_ = now;
  // Each node has its own setting: the node that answered the map and every shard
  // master are asked, and the largest answer bounds them all (the adversarial pass
  // of stop 36 on the Sentinel side: a bound read off one member of the group was
  // too short for a failover that another one led).
  const auto ask = [this](connection& c) {
    c.submit(node_timeout_wire_, false, reply_fn([this](const reply_event& ev) {
               if (ev.status != node_status::pending) return;
               // Refused (a managed service's renamed CONFIG), or another shape: as it was.
               const auto t = parse_node_timeout(ev.reply);
               if (!t) return;
               node_timeout_ms_ = node_timeout_learned_ ? std::max(node_timeout_ms_, *t) : *t;
               node_timeout_learned_ = true;
             }),
             0);
  };
  ask(via);
  for (connection* m : masters_) {
    if (m != nullptr && m != &via) ask(*m);
  }
}

void cluster_endpoint::discovery_failed(std::size_t seed, std::string why) {
  if (!discovery_errors_.empty()) discovery_errors_ += "; ";
  discovery_errors_ += host_port_text(seeds_[seed].host, seeds_[seed].port) + ": " + why;
  if (seed + 1 < seeds_.size()) return ask_seed(seed + 1);
  state_ = state::down;
  down_detail_ = "cluster slot map unknown, no seed answered (" + discovery_errors_ + ")";
  discovery_errors_.clear();
  ++failures_;
  waiting_.fail_all(node_status::connection_error, down_detail_);
  // Requests submitted until the retry fail at once.
  retry_timer_ = schedule_rediscovery(host_, failures_, [this] {
    retry_timer_ = 0;
    if (state_ == state::down) ask_seed(0);
  });
  host_.note_quiet();
}

bool cluster_endpoint::install(const slot_map& map, std::string& error, std::uint64_t asked_ms,
                               const connection& via) {
  if (map.covered() == 0) {
    error = "the cluster's map assigns no slot to a master";
    return false;
  }
  struct master {
    const cluster_shard* shard;
    std::string host;
    int port;
  };
  std::vector<master> found;
  for (const cluster_shard& s : map.shards()) {
    if (s.master < 0) continue;
    const cluster_node& n = s.nodes[static_cast<std::size_t>(s.master)];
    const int port = address_.tls ? (n.tls_port != 0 ? n.tls_port : n.port) : n.port;
    if (port == 0) {
      error =
          "shard master " + n.host + " has no " + (address_.tls ? "port" : "plain TCP port (only a TLS one)");
      return false;
    }
    found.push_back(master{&s, n.host, port});
  }
  std::vector<connection*> masters;
  std::vector<connection*> owner(static_cast<std::size_t>(kClusterSlots), nullptr);
  for (const master& m : found) {
    connection& c = connection_to(m.host, m.port);
    if (std::find(masters.begin(), masters.end(), &c) == masters.end()) masters.push_back(&c);
    // The map, asked at asked_ms, names it master of some slots and online: a drop of
    // its replicas seen settle_ms() or more before no longer holds its writes back
    // (connection::confirm_master).
    // A master listed without slots, or not online (a failed old master others still
    // list), confirms nothing; nor does a map asked of the shard's own nodes: an old
    // master cut off from its promoted replica (and a replica still following it) is
    // exactly the node that has not learned of the failover (the adversarial pass of
    // stop 36: an old master that answered its own map confirmed itself, two holders).
    // A cluster of one shard has no node outside it to ask (nor can it fail over by
    // itself: a replica's election needs a majority of the masters' votes), so its
    // own nodes confirm, as they did before.
    const auto asked_inside = [&] {
      if (found.size() < 2) return false;
      if (&c == &via) return true;
      const shard_link& v = link_of(&via);
      return std::any_of(m.shard->nodes.begin(), m.shard->nodes.end(), [&](const cluster_node& n) {
        return n.host == v.host && (n.port == v.port || n.tls_port == v.port);
      });
    };
    if (!m.shard->ranges.empty() && m.shard->nodes[static_cast<std::size_t>(m.shard->master)].online &&
        !asked_inside()) {
      c.confirm_master(asked_ms, settle_ms());
    }
    for (const auto& [lo, hi] : m.shard->ranges) {
      for (int s = lo; s <= hi; ++s) owner[static_cast<std::size_t>(s)] = &c;
    }
  }
  std::vector<host_port> nodes;
  for (const cluster_shard& s : map.shards()) {
    for (const cluster_node& n : s.nodes) {
      if (n.port != 0) nodes.push_back(host_port{n.host, n.port});
      if (n.tls_port != 0) nodes.push_back(host_port{n.host, n.tls_port});
    }
  }
  std::vector<std::string> ids;
  for (const master& m : found) {
    const cluster_node& n = m.shard->nodes[static_cast<std::size_t>(m.shard->master)];
    if (n.id.empty()) continue;
    ids.push_back(n.id);
    if (mapped_ && std::find(master_ids_.begin(), master_ids_.end(), n.id) == master_ids_.end()) {
      note_master_change("shard master " + host_port_text(m.host, m.port) + " (node " + n.id.substr(0, 8) +
                         ") was no master in the slot map before (a failover?)");
    }
  }
  masters_ = std::move(masters);
  owner_ = std::move(owner);
  master_ids_ = std::move(ids);
  map_nodes_ = std::move(nodes);
  mapped_ = true;
  return true;
}

void cluster_endpoint::note_master_change(std::string why) {
  master_changed_at_ = host_.now();
  master_change_ = "a shard's master changed: " + why + "; no acquire vote for " +
                   std::to_string(host_.restart_quarantine().count()) + " ms from when this client saw it";
}

bool cluster_endpoint::master_change_quarantined() const noexcept {
  const auto q = host_.restart_quarantine();
  return master_changed_at_ && q.count() > 0 && host_.now() - *master_changed_at_ < q;
}

void cluster_endpoint::refresh_after_failure(const std::string& failed_host, int failed_port) {
  if (state_ != state::ready) return;
  // Another master that is up, else the first seed.
  for (connection* m : masters_) {
    const shard_link& l = link_of(m);
    if ((l.host != failed_host || l.port != failed_port) && m->ready()) return refresh_soon(*m, l.host);
  }
  refresh_soon(connection_to(seeds_.front().host, seeds_.front().port), seeds_.front().host);
}

void cluster_endpoint::refresh_soon(connection& via, const std::string& via_host) {
  if (refreshing_ || state_ != state::ready) return;
  const std::uint64_t now = host_.now_ms();
  if (refreshed_once_ && now - last_refresh_ms_ < kRefreshIntervalMs) return;
  refreshing_ = true;
  refreshed_once_ = true;
  last_refresh_ms_ = now;
  ask_map(via, via_host, true, true, 0);
}

void cluster_endpoint::submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
                              std::uint32_t tag) {
  switch (state_) {
    case state::ready:
      return route(std::move(w), force_eval, std::move(s), tag);
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

void cluster_endpoint::route(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
                             std::uint32_t tag) {
  const int slot = w->slot();
  if (slot == wire::kCrossSlot) {
    return fail_unsent(
        *s, index_, tag, node_status::server_error,
        "keys in different hash slots: a Redis Cluster node runs a command on the keys of one slot only");
  }
  connection* c = slot >= 0 ? owner_[static_cast<std::size_t>(slot)] : nullptr;
  // A key-less command, or a slot the map gives no master: the first master (the
  // cluster answers the latter with MOVED or CLUSTERDOWN).
  if (c == nullptr) c = first_master();
  auto r =
      std::make_shared<request_sink>(*this, std::move(w), force_eval, std::move(s), tag, link_of(c).host);
  r->via_port_ = link_of(c).port;
  c->submit(r->form(), force_eval, r, tag);
}

bool cluster_endpoint::follow(request_sink& r, const redirect& to) {
  if (state_ == state::closed) return false;
  if (to.type == redirect::kind::ask && r.asked_) return false;
  const std::string host = to.host.empty() ? r.via_host_ : to.host;
  const bool known = std::any_of(links_.begin(), links_.end(),
                                 [&](const shard_link& l) { return l.host == host && l.port == to.port; });
  if (!known && links_.size() >= kMaxConnections) return false;  // delivered as the error it is
  connection& c = connection_to(host, to.port);
  ++r.redirects_;
  r.via_host_ = host;
  r.via_port_ = to.port;
  const std::shared_ptr<request_sink> self = r.shared_from_this();
  if (to.type == redirect::kind::ask) {
    // This once, on the importing node: ASKING, and the request right behind it on
    // the same connection (the flag holds for the next command only).
    r.asked_ = true;
    c.submit(asking_wire_, false, std::make_shared<discard_sink>(), 0);
    c.submit(r.form(), r.force_eval_, self, r.tag_);
    return true;
  }
  // MOVED: the slot lives there now.
  if (!owner_.empty()) owner_[static_cast<std::size_t>(to.slot)] = &c;
  if (std::find(masters_.begin(), masters_.end(), &c) == masters_.end()) {
    // No master of the current map: a promoted replica (a failover) or a node
    // added since. Until the map shows which, the node's acquires wait out the
    // quarantine, this request's grant included.
    masters_.push_back(&c);
    r.moved_to_new_master_ = true;
    note_master_change("MOVED to " + host_port_text(host, to.port) +
                       ", which the last slot map named no master (a failover?)");
  }
  c.submit(r.form(), r.force_eval_, self, r.tag_);
  refresh_soon(c, host);
  return true;
}

void cluster_endpoint::flush() {
  for (std::size_t i = 0; i < links_.size(); ++i) links_[i].conn->flush();
}

bool cluster_endpoint::quiet() const noexcept {
  if (!waiting_.empty()) return false;
  for (const shard_link& l : links_) {
    if (!l.conn->quiet()) return false;
  }
  return true;
}

void cluster_endpoint::shutdown() {
  state_ = state::closed;
  if (retry_timer_ != 0) host_.cancel_timer(retry_timer_);
  retry_timer_ = 0;
  waiting_.fail_all(node_status::cancelled, "client shut down");
  // By index: a sink called from a shutdown may not add a connection (closed), but
  // stays safe if one did.
  for (std::size_t i = 0; i < links_.size(); ++i) links_[i].conn->shutdown();
}

std::string cluster_endpoint::acquire_exclusion(std::chrono::steady_clock::time_point now,
                                                std::chrono::milliseconds quarantine) const {
  if (master_changed_at_ && quarantine.count() > 0 && now - *master_changed_at_ < quarantine) {
    return master_change_;
  }
  for (const connection* m : masters_) {
    if (std::string why = m->acquire_exclusion(now, quarantine); !why.empty()) {
      return "shard master " + host_port_text(link_of(m).host, link_of(m).port) + ": " + why;
    }
  }
  return "";
}

std::string cluster_endpoint::fencing_exclusion() const {
  for (const connection* m : masters_) {
    if (std::string why = m->fencing_exclusion(); !why.empty()) {
      return "shard master " + host_port_text(link_of(m).host, link_of(m).port) + ": " + why;
    }
  }
  return "";
}

const std::string& cluster_endpoint::run_id() const noexcept {
  return masters_.empty() ? empty_ : masters_.front()->run_id();
}

const connection* cluster_endpoint::memory_master() const noexcept {
  const connection* pick = first_master();
  int worst = -1;
  for (const connection* m : masters_) {
    const int risk = static_cast<int>(eviction_risk_of(m->maxmemory_policy()));
    if (risk > worst) {
      worst = risk;
      pick = m;
    }
  }
  return pick;
}

const std::string& cluster_endpoint::maxmemory_policy() const noexcept {
  const connection* m = memory_master();
  return m == nullptr ? empty_ : m->maxmemory_policy();
}

const std::string& cluster_endpoint::maxmemory() const noexcept {
  const connection* m = memory_master();
  return m == nullptr ? empty_ : m->maxmemory();
}

const std::optional<std::chrono::steady_clock::time_point>& cluster_endpoint::restarted_at() const noexcept {
  const std::optional<std::chrono::steady_clock::time_point>* latest = &none_;
  for (const connection* m : masters_) {
    if (m->restarted_at() && (!*latest || **latest < *m->restarted_at())) latest = &m->restarted_at();
  }
  return *latest;
}

const std::optional<std::chrono::steady_clock::time_point>& cluster_endpoint::jumped_at() const noexcept {
  const std::optional<std::chrono::steady_clock::time_point>* latest = &none_;
  for (const connection* m : masters_) {
    if (m->jumped_at() && (!*latest || **latest < *m->jumped_at())) latest = &m->jumped_at();
  }
  return *latest;
}

std::vector<deployment_member> cluster_endpoint::members() const {
  std::vector<deployment_member> out;
  for (const connection* m : masters_) {
    deployment_member d;
    d.role = "shard master";
    d.address = host_port_text(link_of(m).host, link_of(m).port);
    d.connected = m->ready();
    d.replicas = m->replicas();
    d.slots = static_cast<int>(std::count(owner_.begin(), owner_.end(), m));
    out.push_back(std::move(d));
  }
  return out;
}

bool cluster_endpoint::hears_releases_at(const std::string& host, int port) const {
  if (!mapped_) return true;  // not known yet
  return std::any_of(map_nodes_.begin(), map_nodes_.end(),
                     [&](const host_port& n) { return n.host == host && n.port == port; });
}

void cluster_endpoint::refresh_for_subscribers() {
  if (state_ != state::ready) return;
  for (connection* m : masters_) {
    if (m->ready()) return refresh_soon(*m, link_of(m).host);
  }
}

std::optional<node_address> cluster_endpoint::subscriber_address(const node_address& configured,
                                                                 const std::string& avoid) const {
  node_address a = configured;
  a.topology = node_address::deployment::standalone;
  a.seeds.clear();
  a.db = 0;
  // A cluster delivers classic pub/sub to every node: the first seed, unless it is
  // down, or no node of the latest map (it left the cluster: it hears nothing of its
  // bus), or where the subscriber just went down (a paused seed: this endpoint's
  // own idle connection to it still looks up), and a shard master of the map is up
  // (the notifier then moves the subscriber there).
  const bool seed_up = std::any_of(links_.begin(), links_.end(), [&](const shard_link& l) {
    return l.host == configured.host && l.port == configured.port && l.conn->ready();
  });
  if (seed_up && hears_releases_at(configured.host, configured.port) &&
      host_port_text(configured.host, configured.port) != avoid) {
    return a;
  }
  for (const connection* m : masters_) {
    if (!m->ready() || host_port_text(link_of(m).host, link_of(m).port) == avoid) continue;
    a.host = link_of(m).host;
    a.port = link_of(m).port;
    break;
  }
  return a;
}

}  // namespace redlock::detail
