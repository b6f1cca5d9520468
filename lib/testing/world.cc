#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "io/reactor.h"
#include "world_impl.h"

namespace redlock::testing {

// --- sim_rng ---

namespace {
std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Virtual steady-clock time 0 is this far from the clock's epoch, so that no
// instant of a run is the default-constructed time_point.
constexpr std::int64_t kClockOriginUs = 1'000'000'000;
// Node wall clocks start here (2026-12-01), microseconds since the Unix epoch.
constexpr std::int64_t kWallOriginUs = 1'796'083'200'000'000;
// The least time one turn of a client's loop takes (see arm_timer).
constexpr std::int64_t kTurnUs = 10;
}  // namespace

sim_rng::sim_rng(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) s = splitmix(x);
}

std::uint64_t sim_rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::int64_t sim_rng::between(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
  return lo + static_cast<std::int64_t>(next() % span);
}

double sim_rng::unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

bool sim_rng::chance(double p) {
  if (p <= 0) return false;
  return unit() < p;
}

// --- the reactor and links of one simulated client ---

namespace {

using impl = world::impl;

class world_clock final : public redlock::clock {
 public:
  explicit world_clock(const impl* w) : w_(w) {}
  std::chrono::steady_clock::time_point now() const noexcept override {
    return std::chrono::steady_clock::time_point(std::chrono::microseconds(kClockOriginUs + w_->now_us));
  }

 private:
  const impl* w_;
};

class sim_link final : public detail::link {
 public:
  sim_link(std::shared_ptr<impl> w, std::shared_ptr<impl::conn_state> c) : w_(std::move(w)), c_(std::move(c)) {}
  ~sim_link() override {
    // The client closed its end: what it wrote before still reaches the node
    // (and runs there, as TCP delivers data ahead of the FIN); nothing comes back.
    c_->events = nullptr;
  }
  std::string write(std::string& bytes) override {
    if (!bytes.empty()) w_->send_to_node(c_, std::move(bytes));
    bytes.clear();
    return {};
  }

 private:
  std::shared_ptr<impl> w_;
  std::shared_ptr<impl::conn_state> c_;
};

class sim_reactor final : public detail::reactor {
 public:
  sim_reactor(std::shared_ptr<impl> w, std::shared_ptr<impl::client_state> cl) : w_(std::move(w)), cl_(std::move(cl)) {}
  ~sim_reactor() override { cl_->alive = false; }

  void start(driver& d) override { cl_->driver = &d; }
  std::uint64_t now_ms() const override { return static_cast<std::uint64_t>(w_->now_us / 1000); }
  void refresh() override {}
  void arm_timer(std::uint64_t delay_ms) override {
    if (cl_->closed) return;
    const std::uint64_t gen = ++gens_;
    cl_->timer_gen = gen;
    // Due when the loop's millisecond clock reaches now_ms() + delay, as with uv;
    // a timer armed with no delay runs on the next turn, which on a real machine
    // comes a little later (kTurnUs): a loop that re-arms a zero timer until a
    // deadline passes ends here as it does there.
    const std::int64_t due =
        std::max(w_->now_us + kTurnUs, (w_->now_us / 1000 + static_cast<std::int64_t>(delay_ms)) * 1000);
    auto cl = cl_;
    impl* w = w_.get();
    w_->at(due, [w, cl, gen] {
      if (cl->timer_gen != gen) return;  // re-armed or stopped since
      w->for_client(cl, [cl, gen] {
        if (!cl->alive || cl->closed || cl->timer_gen != gen) return;
        cl->timer_gen = 0;
        cl->driver->on_timer();
      });
    });
  }
  void stop_timer() override { cl_->timer_gen = 0; }
  void idle(bool on) override {
    cl_->idle_on = on;
    if (on) queue_idle(w_.get(), cl_);
  }
  void wake() override {
    if (cl_->wake_queued || cl_->closed) return;
    cl_->wake_queued = true;
    auto cl = cl_;
    impl* w = w_.get();
    w_->at(w_->now_us, [w, cl] {
      w->for_client(cl, [cl] {
        cl->wake_queued = false;
        if (cl->alive && !cl->closed) cl->driver->on_wake();
      });
    });
  }
  void close(std::function<void()> closed) override {
    cl_->closed = true;
    cl_->timer_gen = 0;
    cl_->idle_on = false;
    auto cl = cl_;
    w_->at(w_->now_us, [cl, closed = std::move(closed)] {
      if (cl->alive) closed();  // may destroy this reactor
    });
  }
  std::unique_ptr<detail::link> open(const detail::node_address& address, std::uint64_t, detail::link_events& ev,
                                     node_status& status, std::string& error) override {
    return w_->open(cl_, address, ev, status, error);
  }
  std::string token() override { return w_->token(); }
  std::uint64_t seed() override { return w_->rng.next(); }
  bool drive(const std::function<bool()>& done) override {
    if (w_->driving) return false;
    w_->driving = true;
    // Bounded: an hour of virtual time per blocking call.
    w_->run_until(done, w_->now_us + 3'600'000'000LL);
    w_->driving = false;
    return true;
  }
  bool drivable() const override { return !w_->driving; }

 private:
  static void queue_idle(impl* w, const std::shared_ptr<impl::client_state>& cl) {
    if (cl->idle_queued || cl->closed) return;
    cl->idle_queued = true;
    w->at(w->now_us, [w, cl] {
      w->for_client(cl, [w, cl] {
        cl->idle_queued = false;
        if (!cl->alive || cl->closed || !cl->idle_on) return;
        cl->driver->on_idle();
        // Still on: another turn (after whatever else is due now).
        if (cl->alive && cl->idle_on) queue_idle(w, cl);
      });
    });
  }

  std::shared_ptr<impl> w_;
  std::shared_ptr<impl::client_state> cl_;
  std::uint64_t gens_ = 0;
};

}  // namespace

// --- world::impl ---

world::impl::impl(world_options o) : options(o), rng(o.seed) {
  if (options.nodes == 0) throw std::invalid_argument("redlock::testing::world: nodes must be at least 1");
  if (options.min_latency_us < 0 || options.max_latency_us < options.min_latency_us) {
    throw std::invalid_argument("redlock::testing::world: latency range must satisfy 0 <= min <= max");
  }
  if (!options.persistent_nodes.empty() && options.persistent_nodes.size() != options.nodes) {
    throw std::invalid_argument("redlock::testing::world: persistent_nodes must be empty or have one entry per node");
  }
  if (!options.maxmemory_policies.empty() && options.maxmemory_policies.size() != options.nodes) {
    throw std::invalid_argument(
        "redlock::testing::world: maxmemory_policies must be empty or have one entry per node");
  }
  if (options.restart_loading_us < 0) {
    throw std::invalid_argument("redlock::testing::world: restart_loading_us must not be negative");
  }
  nodes.resize(options.nodes);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const bool keeps = options.persistent_nodes.empty() ? options.persistent : options.persistent_nodes[i];
    sim::node_config cfg;
    cfg.persist = keeps ? sim::persistence::aof_always : sim::persistence::none;
    if (!options.maxmemory_policies.empty()) cfg.maxmemory_policy = options.maxmemory_policies[i];
    cfg.loading_us = options.restart_loading_us;
    nodes[i].node = std::make_unique<sim::node>(cfg, rng.next(), kWallOriginUs);
    nodes[i].min_latency_us = options.min_latency_us;
    nodes[i].max_latency_us = options.max_latency_us;
    nodes[i].clock_base_us = kWallOriginUs;
  }
  clock = std::make_shared<world_clock>(this);
}

world::impl::~impl() = default;

void world::impl::at(std::int64_t t_us, std::function<void()> fn) {
  queue.push(event{std::max(t_us, now_us), ++seq, std::move(fn)});
}

bool world::impl::step(std::int64_t until_us) {
  if (queue.empty() || queue.top().t > until_us) return false;
  // priority_queue::top is const; the element itself is not. Moving its function
  // out leaves t and seq, which order the heap, untouched.
  event e = std::move(const_cast<event&>(queue.top()));
  queue.pop();
  now_us = e.t;
  ++events;
  e.fn();
  return true;
}

bool world::impl::run_until(const std::function<bool()>& done, std::int64_t limit_us) {
  while (!done()) {
    if (!step(limit_us)) {
      now_us = std::max(now_us, limit_us);
      return done();
    }
  }
  return true;
}

std::int64_t world::impl::latency(std::size_t node) {
  return rng.between(nodes[node].min_latency_us, nodes[node].max_latency_us);
}

std::int64_t world::impl::node_now_us(std::size_t node) const {
  const node_state& n = nodes[node];
  const double run = static_cast<double>(now_us - n.clock_from_us) * (1.0 + n.clock_rate);
  return n.clock_base_us + static_cast<std::int64_t>(run);
}

bool world::impl::passes(const conn_state& c) const {
  return !nodes[c.node].black_hole && !(c.node < c.client->cut.size() && c.client->cut[c.node]);
}

void world::impl::for_client(const std::shared_ptr<client_state>& cl, std::function<void()> fn) {
  if (cl->paused_until_us > now_us || !cl->waiting.empty()) {
    cl->waiting.push_back(std::move(fn));
    if (!cl->resume_queued) {
      cl->resume_queued = true;
      at(std::max(cl->paused_until_us, now_us), [this, cl] { resume_client(cl); });
    }
    return;
  }
  fn();
  if (on_client_turn) on_client_turn(cl->id);
}

void world::impl::resume_client(const std::shared_ptr<client_state>& cl) {
  cl->resume_queued = false;
  while (!cl->waiting.empty()) {
    if (cl->paused_until_us > now_us) {  // paused again meanwhile
      cl->resume_queued = true;
      at(cl->paused_until_us, [this, cl] { resume_client(cl); });
      return;
    }
    std::function<void()> fn = std::move(cl->waiting.front());
    cl->waiting.pop_front();
    fn();
    if (on_client_turn) on_client_turn(cl->id);
  }
}

void world::impl::send_to_node(const std::shared_ptr<conn_state>& c, std::string bytes) {
  if (c->dead) return;
  std::int64_t t = now_us + latency(c->node);
  if (!c->to_node.empty()) t = std::max(t, c->to_node.back().due_us);
  c->to_node.push_back(message{message::kind::data, t, std::move(bytes)});
  at(t, [this, c] { pump_to_node(c); });
}

void world::impl::send_to_client(const std::shared_ptr<conn_state>& c, message::kind what, std::string bytes) {
  std::int64_t t = now_us + latency(c->node);
  if (!c->to_client.empty()) t = std::max(t, c->to_client.back().due_us);
  c->to_client.push_back(message{what, t, std::move(bytes)});
  at(t, [this, c] { pump_to_client(c); });
}

void world::impl::pump_to_node(const std::shared_ptr<conn_state>& c) {
  while (!c->to_node.empty() && c->to_node.front().due_us <= now_us) {
    node_state& n = nodes[c->node];
    if (c->dead || !c->session || c->node_epoch != n.epoch || !n.up) {
      c->to_node.clear();  // nobody reads them any more
      return;
    }
    if (!passes(*c)) return;  // held back until the path opens (kick)
    std::string bytes = std::move(c->to_node.front().bytes);
    c->to_node.pop_front();
    if (n.paused) {
      n.paused_input.push_back(node_state::pending{c, std::move(bytes)});
      continue;
    }
    execute(c, std::move(bytes));
  }
}

void world::impl::execute(const std::shared_ptr<conn_state>& c, std::string bytes) {
  node_state& n = nodes[c->node];
  if (c->dead || !c->session || c->node_epoch != n.epoch || !n.up) return;
  if (on_node_input) on_node_input(c->node, bytes);
  std::string out;
  const bool ok = n.node->feed(*c->session, bytes.data(), bytes.size(), node_now_us(c->node), out);
  ++commands;
  deliver(c, std::move(out), ok);
}

void world::impl::deliver(const std::shared_ptr<conn_state>& c, std::string out, bool ok) {
  node_state& n = nodes[c->node];
  if (n.drop_replies && !out.empty()) {
    out.clear();
    c->lost_bytes = true;
  }
  if (!out.empty()) send_to_client(c, message::kind::data, std::move(out));
  if (!ok) {
    // The node closes the connection (protocol error): FIN after its replies.
    c->dead = true;
    c->to_node.clear();
    if (!c->down_queued) {
      c->down_queued = true;
      send_to_client(c, message::kind::down, "connection closed by server");
    }
  }
  ship_writes(c->node);
  if (ok && c->session && n.node->blocked(*c->session)) arm_wait_timer(c);
}

namespace {
std::string node_name(std::size_t i) { return "node" + std::to_string(i); }
}  // namespace

void world::impl::replicate(std::size_t replica, std::size_t master) {
  node_state& r = nodes.at(replica);
  if (r.master_of) nodes.at(*r.master_of).node->detach_replica(node_name(replica));
  ++r.repl_gen;
  r.repl_in.clear();
  r.master_of = master;
  r.node->follow(node_name(master), 6379);
  r.node->load(*nodes.at(master).node);
  nodes[master].node->attach_replica(node_name(replica), node_name(replica), 6379);
}

void world::impl::promote(std::size_t replica) {
  node_state& r = nodes.at(replica);
  if (r.master_of) nodes.at(*r.master_of).node->detach_replica(node_name(replica));
  ++r.repl_gen;
  r.repl_in.clear();
  r.master_of.reset();
  r.node->promote();
}

void world::impl::ship_writes(std::size_t master) {
  std::vector<sim::node::replicated_write> ws = nodes[master].node->take_writes();
  if (ws.empty()) return;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    node_state& r = nodes[i];
    if (!r.master_of || *r.master_of != master) continue;
    for (const auto& w : ws) {
      std::int64_t t = now_us + latency(i);
      if (!r.repl_in.empty()) t = std::max(t, r.repl_in.back().due_us);
      r.repl_in.push_back(node_state::repl_record{t, w});
      at(t, [this, i] { pump_replication(i); });
    }
  }
}

void world::impl::pump_replication(std::size_t replica) {
  node_state& r = nodes[replica];
  if (!r.master_of) return;
  const std::size_t master = *r.master_of;
  const node_state& m = nodes[master];
  while (!r.repl_in.empty() && r.repl_in.front().due_us <= now_us) {
    if (!r.up || r.paused || r.black_hole || m.black_hole || r.repl_stalled) {
      // Held back (TCP retransmits) until the path opens: look again soon.
      if (!r.repl_pump_queued) {
        r.repl_pump_queued = true;
        after(10'000, [this, replica] {
          nodes[replica].repl_pump_queued = false;
          pump_replication(replica);
        });
      }
      return;
    }
    const sim::node::replicated_write w = std::move(r.repl_in.front().w);
    r.repl_in.pop_front();
    r.node->apply(w);
    const std::uint64_t gen = r.repl_gen, offset = w.offset;
    after(latency(master), [this, replica, master, gen, offset] {
      if (nodes[replica].repl_gen != gen || !nodes[master].up) return;
      nodes[master].node->ack(node_name(replica), offset);
      poll_blocked(master);
    });
  }
}

void world::impl::poll_blocked(std::size_t i) {
  node_state& n = nodes[i];
  if (!n.up || n.paused) return;
  // A copy: unblock() runs requests whose replies may end connections.
  const std::vector<std::shared_ptr<conn_state>> conns = n.conns;
  for (auto& c : conns) {
    if (c->dead || !c->session || c->node_epoch != n.epoch || !n.node->blocked(*c->session)) continue;
    std::string out;
    const bool ok = n.node->unblock(*c->session, node_now_us(i), out);
    if (out.empty() && ok) continue;
    deliver(c, std::move(out), ok);
  }
}

void world::impl::arm_wait_timer(const std::shared_ptr<conn_state>& c) {
  const std::int64_t deadline = nodes[c->node].node->wait_deadline(*c->session);
  if (deadline < 0) return;
  const std::int64_t left = std::max<std::int64_t>(deadline - node_now_us(c->node), 0) + 1;
  at(now_us + left, [this, c] {
    node_state& n = nodes[c->node];
    if (c->dead || !c->session || c->node_epoch != n.epoch || !n.up || n.paused) return;
    if (!n.node->blocked(*c->session)) return;
    std::string out;
    const bool ok = n.node->unblock(*c->session, node_now_us(c->node), out);
    if (!out.empty() || !ok) {
      deliver(c, std::move(out), ok);
    } else {
      arm_wait_timer(c);  // the node's clock is slower: not due yet
    }
  });
}

void world::impl::pump_to_client(const std::shared_ptr<conn_state>& c) {
  while (!c->to_client.empty() && c->to_client.front().due_us <= now_us) {
    if (!passes(*c)) return;  // held back until the path opens (kick)
    message m = std::move(c->to_client.front());
    c->to_client.pop_front();
    for_client(c->client, [c, m = std::move(m)] {
      if (c->events == nullptr) return;  // the client closed its end
      switch (m.what) {
        case message::kind::up:
          if (c->up) return;
          c->up = true;
          c->events->on_link_up();
          return;
        case message::kind::data:
          if (!m.bytes.empty()) c->events->on_link_data(m.bytes.data(), m.bytes.size());
          return;
        case message::kind::down: {
          link_events* ev = c->events;
          c->events = nullptr;  // final: no more events for this link
          ev->on_link_down(node_status::connection_error, m.bytes);
          return;
        }
      }
    });
  }
}

void world::impl::kick(const std::shared_ptr<conn_state>& c) {
  const std::int64_t t = now_us + latency(c->node);
  if (!c->syn_sent) {
    at(t, [this, c] { syn(c); });
    return;
  }
  // What was held back arrives together, one latency from now, in order.
  for (auto& m : c->to_node) m.due_us = std::max(m.due_us, t);
  for (auto& m : c->to_client) m.due_us = std::max(m.due_us, t);
  if (!c->to_node.empty()) at(t, [this, c] { pump_to_node(c); });
  if (!c->to_client.empty()) at(t, [this, c] { pump_to_client(c); });
}

void world::impl::reset(const std::shared_ptr<conn_state>& c, std::string why) {
  if (c->dead && c->down_queued) return;
  c->dead = true;
  c->to_node.clear();
  if (c->down_queued || !c->syn_sent) return;  // (a connect still on its way finds the node's state)
  c->down_queued = true;
  send_to_client(c, message::kind::down, std::move(why));
}

void world::impl::syn(const std::shared_ptr<conn_state>& c) {
  if (c->syn_sent || c->events == nullptr) return;  // done, or the client gave up the attempt
  if (!passes(*c)) return;                          // a black hole: the connect hangs (kick retries)
  c->syn_sent = true;
  node_state& n = nodes[c->node];
  if (!n.up) {
    c->dead = true;
    c->down_queued = true;
    send_to_client(c, message::kind::down, "connect: connection refused");
    return;
  }
  // A paused server's kernel still completes the handshake.
  c->session = n.node->open_session();
  c->node_epoch = n.epoch;
  send_to_client(c, message::kind::up, {});
}

namespace {
// A cluster node id: 40 hex digits, from the world index ("node3" -> "3000...03").
std::string cluster_id(std::size_t i) {
  static const char hex[] = "0123456789abcdef";
  std::string id(40, '0');
  for (std::size_t k = 0; k < 8; ++k) id[7 - k] = hex[(i >> (4 * k)) & 15];
  std::reverse(id.begin(), id.begin() + 8);
  for (std::size_t k = 0; k < 8; ++k) id[39 - k] = hex[(i >> (4 * k)) & 15];
  return id;
}
}  // namespace

std::size_t world::impl::add_cluster(std::vector<std::vector<std::size_t>> shards) {
  sim_cluster c;
  c.failed.assign(nodes.size(), false);
  const int n = static_cast<int>(shards.size());
  for (int k = 0; k < n; ++k) c.ranges.emplace_back(16384 * k / n, 16384 * (k + 1) / n - 1);
  c.shards = std::move(shards);
  for (const auto& sh : c.shards) {
    for (std::size_t j = 1; j < sh.size(); ++j) replicate(sh[j], sh[0]);
  }
  clusters.push_back(std::move(c));
  publish_map(clusters.size() - 1);
  return clusters.size() - 1;
}

void world::impl::publish_map(std::size_t k) {
  const sim_cluster& c = clusters.at(k);
  std::vector<sim::cluster_shard> map;
  for (std::size_t s = 0; s < c.shards.size(); ++s) {
    sim::cluster_shard sh;
    sh.slots.push_back(c.ranges[s]);
    for (std::size_t j = 0; j < c.shards[s].size(); ++j) {
      const std::size_t i = c.shards[s][j];
      sh.members.push_back(sim::cluster_member{cluster_id(i), node_name(i), 6379, j == 0, c.failed[i]});
    }
    map.push_back(std::move(sh));
  }
  for (const auto& sh : c.shards) {
    for (std::size_t i : sh) nodes[i].node->set_cluster(cluster_id(i), map);
  }
}

std::optional<std::pair<std::size_t, std::size_t>> world::impl::cluster_of(std::size_t node) const {
  for (std::size_t k = 0; k < clusters.size(); ++k) {
    for (std::size_t s = 0; s < clusters[k].shards.size(); ++s) {
      const auto& sh = clusters[k].shards[s];
      if (std::find(sh.begin(), sh.end(), node) != sh.end()) return std::make_pair(k, s);
    }
  }
  return std::nullopt;
}

bool world::impl::failover(std::size_t master) {
  const auto where = cluster_of(master);
  if (!where) return false;
  sim_cluster& c = clusters[where->first];
  auto& sh = c.shards[where->second];
  if (sh.front() != master) return false;
  std::size_t replica = nodes.size();
  for (std::size_t j = 1; j < sh.size(); ++j) {
    if (!c.failed[sh[j]] && nodes[sh[j]].up) {
      replica = sh[j];
      break;
    }
  }
  if (replica == nodes.size()) return false;
  if (nodes[master].up) crash(master);
  promote(replica);
  // The shard's other replicas follow the new master (a full sync).
  for (std::size_t j = 1; j < sh.size(); ++j) {
    if (sh[j] != replica && !c.failed[sh[j]]) replicate(sh[j], replica);
  }
  sh.erase(std::find(sh.begin(), sh.end(), replica));
  sh.insert(sh.begin(), replica);
  c.failed[master] = true;
  publish_map(where->first);
  return true;
}

void world::impl::rejoin(std::size_t node) {
  const auto where = cluster_of(node);
  if (!where) return;
  sim_cluster& c = clusters[where->first];
  if (!c.failed[node]) return;
  node_state& n = nodes[node];
  if (n.up) crash(node);
  n.node->restart(node_now_us(node));
  n.up = true;
  c.failed[node] = false;
  replicate(node, c.shards[where->second].front());
  publish_map(where->first);
}

std::unique_ptr<reactor> world::impl::make_reactor(std::shared_ptr<client_state> cl) {
  return std::make_unique<sim_reactor>(self.lock(), std::move(cl));
}

std::unique_ptr<link> world::impl::open(const std::shared_ptr<client_state>& cl, const node_address& a,
                                        link_events& ev, node_status& status, std::string& error) {
  std::size_t k = nodes.size();
  if (a.type == node_address::kind::tcp && a.host.rfind("node", 0) == 0 && a.host.size() > 4) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(a.host.c_str() + 4, &end, 10);
    if (end != nullptr && *end == '\0') k = static_cast<std::size_t>(v);
  }
  if (k >= nodes.size()) {
    status = node_status::connection_error;
    error = "cannot resolve host: no address";
    return nullptr;
  }
  prune(k);
  auto c = std::make_shared<conn_state>();
  c->client = cl;
  c->node = k;
  c->events = &ev;
  nodes[k].conns.push_back(c);
  after(latency(k), [this, c] { syn(c); });
  return std::make_unique<sim_link>(self.lock(), c);
}

std::string world::impl::token() {
  static const char hex[] = "0123456789abcdef";
  std::string t(32, '0');
  std::uint64_t a = rng.next(), b = rng.next();
  for (int i = 0; i < 16; ++i) {
    t[static_cast<std::size_t>(i)] = hex[(a >> (4 * i)) & 15];
    t[static_cast<std::size_t>(16 + i)] = hex[(b >> (4 * i)) & 15];
  }
  return t;
}

std::shared_ptr<world::impl::client_state> world::impl::client_of(const client& c) const {
  for (const auto& cl : clients) {
    if (cl->tag == &c) return cl;
  }
  throw std::invalid_argument("redlock::testing::world: not a client of this world");
}

std::vector<std::shared_ptr<world::impl::conn_state>> world::impl::live_conns(std::size_t i) {
  prune(i);
  return nodes[i].conns;
}

void world::impl::crash(std::size_t i) {
  node_state& n = nodes[i];
  n.up = false;
  n.paused = false;
  n.paused_input.clear();
  ++n.epoch;
  for (auto& c : live_conns(i)) {
    if (c->syn_sent) reset(c, "read: connection reset by peer");
  }
}

void world::impl::prune(std::size_t i) {
  auto& v = nodes[i].conns;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](const std::shared_ptr<conn_state>& c) {
                           if (c->events != nullptr) return false;  // the client still has it
                           // The client closed its end: done once the node has all it wrote.
                           return c->dead || !c->syn_sent || c->to_node.empty();
                         }),
          v.end());
}

// --- world ---

world::world(world_options options) : impl_(std::make_shared<impl>(std::move(options))) { impl_->self = impl_; }

world::~world() = default;

std::vector<std::string> world::node_uris() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < impl_->nodes.size(); ++i) out.push_back("redis://node" + std::to_string(i) + ":6379");
  return out;
}

std::size_t world::node_count() const { return impl_->nodes.size(); }

std::unique_ptr<client> world::make_client(client_options options) {
  return impl_->make_client(std::move(options), node_uris());
}

std::unique_ptr<client> world::impl::make_client(client_options co, std::vector<std::string> uris) {
  co.nodes = std::move(uris);
  co.clock = clock;
  auto cl = std::make_shared<client_state>();
  cl->id = clients.size();
  cl->cut.assign(nodes.size(), false);
  clients.push_back(cl);
  try {
    auto c = detail::client_access::make(std::move(co), make_reactor(cl));
    cl->tag = c.get();
    return c;
  } catch (...) {
    clients.pop_back();
    throw;
  }
}

std::chrono::steady_clock::time_point world::now() const { return impl_->clock->now(); }

std::chrono::microseconds world::elapsed() const { return std::chrono::microseconds(impl_->now_us); }

void world::advance(std::chrono::microseconds d) {
  const std::int64_t until = impl_->now_us + std::max<std::int64_t>(0, d.count());
  const bool nested = impl_->driving;
  impl_->driving = true;
  while (impl_->step(until)) {
  }
  impl_->now_us = std::max(impl_->now_us, until);
  impl_->driving = nested;
}

bool world::run_until(const std::function<bool()>& done, std::chrono::microseconds limit) {
  const bool nested = impl_->driving;
  impl_->driving = true;
  const bool ok = impl_->run_until(done, impl_->now_us + std::max<std::int64_t>(0, limit.count()));
  impl_->driving = nested;
  return ok;
}

void world::pause_node(std::size_t i) {
  auto& n = impl_->nodes.at(i);
  if (n.up) n.paused = true;
}

void world::resume_node(std::size_t i) {
  auto& n = impl_->nodes.at(i);
  if (!n.paused) return;
  n.paused = false;
  std::deque<impl::node_state::pending> input;
  input.swap(n.paused_input);
  for (auto& p : input) impl_->execute(p.conn, std::move(p.bytes));
  impl_->poll_blocked(i);  // WAITs whose replicas answered, or timed out, meanwhile
}

void world::crash_node(std::size_t i) {
  if (impl_->nodes.at(i).up) impl_->crash(i);
}

void world::restart_node(std::size_t i) {
  auto& n = impl_->nodes.at(i);
  if (n.up) impl_->crash(i);
  n.node->restart(impl_->node_now_us(i));
  n.up = true;
}

bool world::node_up(std::size_t i) const { return impl_->nodes.at(i).up; }

void world::black_hole_node(std::size_t i, bool on) {
  auto& n = impl_->nodes.at(i);
  if (n.black_hole == on) return;
  n.black_hole = on;
  if (on) return;
  for (auto& c : impl_->live_conns(i)) {
    if (impl_->passes(*c)) impl_->kick(c);
  }
}

void world::drop_replies(std::size_t i, bool on) {
  auto& n = impl_->nodes.at(i);
  if (n.drop_replies == on) return;
  n.drop_replies = on;
  if (on) return;
  // A stream that lost bytes cannot go on: such connections are reset.
  for (auto& c : impl_->live_conns(i)) {
    if (c->lost_bytes) impl_->reset(c, "read: connection reset by peer");
  }
}

void world::reset_connections(std::size_t i) {
  for (auto& c : impl_->live_conns(i)) {
    if (c->syn_sent) impl_->reset(c, "read: connection reset by peer");
  }
}

void world::partition(const client& c, std::size_t node, bool cut) {
  auto cl = impl_->client_of(c);
  if (node >= cl->cut.size()) throw std::out_of_range("redlock::testing::world::partition: no such node");
  if (cl->cut[node] == cut) return;
  cl->cut[node] = cut;
  if (cut) return;
  for (auto& conn : impl_->live_conns(node)) {
    if (conn->client == cl && impl_->passes(*conn)) impl_->kick(conn);
  }
}

void world::set_node_latency(std::size_t i, std::int64_t min_us, std::int64_t max_us) {
  auto& n = impl_->nodes.at(i);
  n.min_latency_us = std::max<std::int64_t>(0, min_us);
  n.max_latency_us = std::max(n.min_latency_us, max_us);
}

void world::jump_node_clock(std::size_t i, std::chrono::milliseconds by) {
  auto& n = impl_->nodes.at(i);
  n.clock_base_us = impl_->node_now_us(i) + by.count() * 1000;
  n.clock_from_us = impl_->now_us;
}

void world::set_node_clock_rate(std::size_t i, double rate) {
  auto& n = impl_->nodes.at(i);
  if (!(rate > -1.0)) throw std::invalid_argument("redlock::testing::world::set_node_clock_rate: rate must be > -1");
  n.clock_base_us = impl_->node_now_us(i);
  n.clock_from_us = impl_->now_us;
  n.clock_rate = rate;
}

std::chrono::microseconds world::node_clock(std::size_t i) const {
  (void)impl_->nodes.at(i);
  return std::chrono::microseconds(impl_->node_now_us(i));
}

void world::inject_error(std::size_t i, std::string command, std::string error_line) {
  impl_->nodes.at(i).node->inject_error(std::move(command), std::move(error_line));
}

void world::pause_client(const client& c, std::chrono::microseconds d) {
  auto cl = impl_->client_of(c);
  cl->paused_until_us = std::max(cl->paused_until_us, impl_->now_us + std::max<std::int64_t>(0, d.count()));
}

std::optional<key_state> world::key_at(std::size_t node, const std::string& key) const {
  const auto now = impl_->node_now_us(node);
  auto v = impl_->nodes.at(node).node->get(key, now);
  if (!v) return std::nullopt;
  return key_state{*v, impl_->nodes[node].node->pttl(key, now)};
}

std::vector<std::string> world::keys_at(std::size_t node) const {
  return impl_->nodes.at(node).node->keys(impl_->node_now_us(node));
}

void world::delete_key_everywhere(const std::string& key) {
  for (auto& n : impl_->nodes) n.node->del(key);
}

void world::expire_key_everywhere(const std::string& key) {
  // Expired now is, for every reader, absent: the same as a delete.
  for (auto& n : impl_->nodes) n.node->del(key);
}

void world::steal_key_everywhere(const std::string& key, const std::string& value, std::chrono::milliseconds ttl) {
  for (std::size_t i = 0; i < impl_->nodes.size(); ++i) {
    impl_->nodes[i].node->set(key, value, ttl.count(), impl_->node_now_us(i));
  }
}

std::uint64_t world::events_run() const { return impl_->events; }

std::uint64_t world::commands_run() const { return impl_->commands; }

}  // namespace redlock::testing
