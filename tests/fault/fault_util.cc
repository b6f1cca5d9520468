#include "fault_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace redlock::test {

namespace {

// Writes inside a critical section only while this much validity is left, so
// that the write lands inside the holder's window even on a loaded machine.
constexpr std::chrono::milliseconds kWriteMargin{50};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

struct ctx_deleter {
  void operator()(redisContext* c) const noexcept {
    if (c != nullptr) redisFree(c);
  }
};
using ctx_ptr = std::unique_ptr<redisContext, ctx_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr) freeReplyObject(r);
  }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

ctx_ptr connect_to(int port) {
  timeval tv{2, 0};
  ctx_ptr c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (!c || c->err != 0)
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                             (c ? c->errstr : "out of memory"));
  redisSetTimeout(c.get(), tv);
  return c;
}

reply_ptr run(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  reply_ptr r(
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
  if (!r) throw std::runtime_error(std::string("redis command failed: ") + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis error: " + std::string(r->str, r->len));
  return r;
}

}  // namespace

std::chrono::seconds soak_duration() {
  const char* env = std::getenv("REDLOCK_SOAK_SECONDS");
  if (env == nullptr || *env == '\0') return std::chrono::seconds(0);
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  if (end == env || v < 0) return std::chrono::seconds(0);
  return std::chrono::seconds(v);
}

int repeat_for_soak(const std::function<void(int round)>& body, int min_rounds) {
  const auto until = steady::now() + soak_duration();
  int round = 0;
  do {
    body(round++);
    if (::testing::Test::HasFatalFailure()) break;
  } while (round < min_rounds || steady::now() < until);
  return round;
}

void figures::publish() const {
  std::ostringstream line;
  line << "FIGURES scenario=" << scenario << " runs=" << runs << " operations=" << operations
       << " faults=" << faults << " violations=" << violations;
  if (!extra.empty()) line << " " << extra;
  std::cout << line.str() << std::endl;
  ::testing::Test::RecordProperty("figures", line.str());
}

client_options scenario_options(const std::vector<std::string>& uris) {
  client_options o;
  o.nodes = uris;
  o.command_timeout = 150ms;
  o.connect_timeout = 500ms;
  o.reconnect_min_backoff = 5ms;
  o.reconnect_max_backoff = 100ms;
  return o;
}

std::vector<std::unique_ptr<fault_proxy>> proxy_each(redis_cluster& nodes, std::vector<std::string>& uris) {
  std::vector<std::unique_ptr<fault_proxy>> proxies;
  uris.clear();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    proxies.push_back(std::make_unique<fault_proxy>(nodes[i].port()));
    uris.push_back(proxies.back()->uri());
  }
  return proxies;
}

// ------------------------------------------------------------------ redis_counter

struct redis_counter::impl {
  std::mutex mu;  // one connection, shared by threads
  ctx_ptr c;
  std::string key;
};

redis_counter::redis_counter(int port, std::string key) : impl_(std::make_unique<impl>()) {
  impl_->c = connect_to(port);
  impl_->key = std::move(key);
}

redis_counter::~redis_counter() = default;

std::int64_t redis_counter::read() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  reply_ptr r = run(impl_->c.get(), {"GET", impl_->key});
  if (r->type == REDIS_REPLY_NIL) return 0;
  return std::stoll(std::string(r->str, r->len));
}

void redis_counter::write(std::int64_t v) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  (void)run(impl_->c.get(), {"SET", impl_->key, std::to_string(v)});
}

// ------------------------------------------------------------------ fenced_resource

struct fenced_resource::impl {
  std::mutex mu;  // one connection, shared by threads
  ctx_ptr c;
  std::string data, seen, log;
  std::string script;
};

fenced_resource::fenced_resource(int port, std::string name) : impl_(std::make_unique<impl>()) {
  impl_->c = connect_to(port);
  impl_->data = name;
  impl_->seen = name + ":fence";
  impl_->log = name + ":log";
  // The library's script, unchanged, as the body of a local function; its accepted
  // tokens are appended to KEYS[3] in the same atomic script.
  impl_->script = std::string("local function fenced_write()\n") + redlock::fenced_write_script +
                  "end\n"
                  "local r = fenced_write()\n"
                  "if r == 1 then redis.call('RPUSH', KEYS[3], ARGV[1]) end\n"
                  "return r\n";
}

fenced_resource::~fenced_resource() = default;

bool fenced_resource::write(std::uint64_t fence, const std::string& value) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  reply_ptr r = run(impl_->c.get(), {"EVAL", impl_->script, "3", impl_->data, impl_->seen, impl_->log,
                                     std::to_string(fence), value});
  if (r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("fenced write: unexpected reply");
  return r->integer == 1;
}

std::vector<std::uint64_t> fenced_resource::accepted() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  reply_ptr r = run(impl_->c.get(), {"LRANGE", impl_->log, "0", "-1"});
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    out.push_back(std::stoull(std::string(r->element[i]->str, r->element[i]->len)));
  }
  return out;
}

// ------------------------------------------------------------------ workload

std::string error_name(std::error_code ec) {
  if (!ec) return "ok";
  if (ec.category() != redlock::category()) return "other:" + ec.message();
  return redlock::to_string(static_cast<errc>(ec.value()));
}

workload_result run_workload(client& c, const workload& w, history& h, const std::atomic<bool>& stop,
                             steady::time_point until, bool keep_log) {
  workload_result res;
  std::mt19937_64 rng(std::hash<std::string>{}(w.owner) ^ static_cast<std::uint64_t>(mono_ns()));
  acquire_options o;
  o.ttl = w.ttl;
  o.retry = retry_policy::once();
  o.fencing = w.fencing;
  const auto pause_us = static_cast<std::uint64_t>(std::max<std::int64_t>(1, w.pause_max.count()));
  while (!stop.load() && steady::now() < until) {
    const std::int64_t invoke = mono_ns();
    acquire_result r = c.acquire(w.resource, o);
    const std::int64_t done = mono_ns();
    ++res.attempts;
    if (keep_log) {
      res.log.push_back({invoke, done, r ? std::string() : error_name(r.report.error),
                         r ? std::string() : r.report.message()});
    }
    if (!r) {
      h.record_failure(error_name(r.report.error));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % pause_us));
      continue;
    }
    ++res.grants;
    const lease info = r.lock.info();
    grant g;
    g.owner = w.owner;
    g.token = info.token;
    g.invoke_ns = invoke;
    g.complete_ns = done;
    g.valid_until_ns = done + std::chrono::duration_cast<std::chrono::nanoseconds>(r.report.validity).count();
    if (info.valid_until) {
      g.valid_until_ns = std::min(
          g.valid_until_ns,
          std::chrono::duration_cast<std::chrono::nanoseconds>(info.valid_until->time_since_epoch()).count());
    }
    g.fence = r.lock.fence();
    const std::size_t idx = h.record_grant(g);
    // The critical section.
    if (w.shared_counter != nullptr) {
      const std::int64_t v = w.shared_counter->read();
      std::this_thread::sleep_for(w.hold);
      if (r.lock.remaining_validity() > kWriteMargin) {
        w.shared_counter->write(v + 1);
        ++res.increments;
      } else {
        ++res.skipped_writes;
      }
    } else {
      std::this_thread::sleep_for(w.hold);
    }
    if (w.fenced != nullptr && g.fence && r.lock.remaining_validity() > kWriteMargin) {
      if (w.fenced->write(*g.fence, w.owner)) {
        ++res.fenced_accepted;
      } else {
        ++res.fenced_refused;
      }
    }
    h.record_release(idx, mono_ns());
    const report rel = r.lock.release();
    if (!rel) {
      ++res.release_failures;
      if (res.release_errors.size() < 10) res.release_errors.push_back(rel.message());
    }
  }
  return res;
}

std::uint64_t contention_outcome::attempts() const {
  std::uint64_t n = 0;
  for (const auto& r : results) n += r.attempts;
  return n;
}

std::uint64_t contention_outcome::release_failures() const {
  std::uint64_t n = 0;
  for (const auto& r : results) n += r.release_failures;
  return n;
}

std::int64_t contention_outcome::increments() const {
  std::int64_t n = 0;
  for (const auto& r : results) n += r.increments;
  return n;
}

contention_outcome run_contention(const contention_round& spec) {
  contention_outcome out;
  client_options o = scenario_options(spec.uris);
  if (spec.tune) spec.tune(o);
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < spec.clients; ++i) clients.push_back(std::make_unique<client>(o));
  for (auto& c : clients) EXPECT_TRUE(wait_connected(*c));
  std::atomic<bool> stop{false};
  out.results.resize(static_cast<std::size_t>(spec.clients));
  std::vector<std::thread> threads;
  const auto until = steady::now() + spec.length;
  for (int i = 0; i < spec.clients; ++i) {
    threads.emplace_back([&, i] {
      workload w = spec.base;
      w.owner = spec.owner_prefix + std::to_string(i);
      out.results[static_cast<std::size_t>(i)] =
          run_workload(*clients[static_cast<std::size_t>(i)], w, out.h, stop, until, /*keep_log=*/true);
    });
  }
  if (spec.nemesis) spec.nemesis(until, out.h);
  for (auto& t : threads) t.join();
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  return v[static_cast<std::size_t>(rank + 0.5)];
}

// ------------------------------------------------------------------ worker processes

namespace {

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string join(const std::vector<std::string>& v, char sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out.push_back(sep);
    out += s;
  }
  return out;
}

}  // namespace

worker_process::worker_process(const worker_spec& spec) {
  std::string tmpl = "/tmp/redlock-test-" + std::to_string(::getpid()) + "-worker-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error("mkstemp: " + std::string(std::strerror(errno)));
  ::close(fd);
  out_path_ = tmpl;
  std::vector<std::string> args = {
      self_exe(),
      "--redlock-worker",
      "mode=" + spec.mode,
      "nodes=" + join(spec.nodes, ','),
      "resource=" + spec.w.resource,
      "owner=" + spec.w.owner,
      "ttl=" + std::to_string(spec.w.ttl.count()),
      "hold_us=" + std::to_string(spec.w.hold.count()),
      "pause_us=" + std::to_string(spec.w.pause_max.count()),
      "fencing=" + std::string(spec.w.fencing ? "1" : "0"),
      "duration=" + std::to_string(spec.duration.count()),
      "counter_port=" + std::to_string(spec.counter_port),
      "counter_key=" + spec.counter_key,
      "fenced_port=" + std::to_string(spec.fenced_port),
      "fenced_name=" + spec.fenced_name,
      "out=" + out_path_,
  };
  args.insert(args.end(), spec.extra.begin(), spec.extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    ::unlink(out_path_.c_str());
    throw std::runtime_error("posix_spawn: " + std::string(std::strerror(rc)));
  }
  pid_ = pid;
}

worker_process::~worker_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) == -1 && errno == EINTR) {
    }
  }
  ::unlink(out_path_.c_str());
}

bool worker_process::wait(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return true;
  const auto end = steady::now() + limit;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      std::ifstream in(out_path_);
      std::stringstream ss;
      ss << in.rdbuf();
      output_ = ss.str();
      return true;
    }
    if (r < 0 && errno != EINTR) return false;
    if (steady::now() >= end) return false;
    std::this_thread::sleep_for(5ms);
  }
}

history worker_process::result_history() const {
  std::string hist;
  std::istringstream in(output_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("G ", 0) == 0 || line.rfind("F ", 0) == 0) hist += line + "\n";
  }
  return history::parse(hist);
}

std::int64_t worker_process::increments() const {
  std::istringstream in(output_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("C ", 0) == 0) return std::stoll(line.substr(2));
  }
  return 0;
}

int worker_main(int argc, char** argv) {
  // Die with the test process.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::map<std::string, std::string> kv;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    if (eq != std::string::npos) kv[a.substr(0, eq)] = a.substr(eq + 1);
  }
  try {
    if (kv["mode"] == "pause_holder") return pause_holder_main(kv);
    if (kv["mode"] == "sigpipe_probe") return sigpipe_probe_main(kv);
    workload w;
    w.resource = kv.at("resource");
    w.owner = kv.at("owner");
    w.ttl = std::chrono::milliseconds(std::stoll(kv.at("ttl")));
    w.hold = std::chrono::microseconds(std::stoll(kv.at("hold_us")));
    w.pause_max = std::chrono::microseconds(std::stoll(kv.at("pause_us")));
    w.fencing = kv.at("fencing") == "1";
    const auto duration = std::chrono::milliseconds(std::stoll(kv.at("duration")));
    const int counter_port = std::stoi(kv.at("counter_port"));
    const int fenced_port = std::stoi(kv.at("fenced_port"));
    std::unique_ptr<redis_counter> ctr;
    if (counter_port != 0) ctr = std::make_unique<redis_counter>(counter_port, kv.at("counter_key"));
    std::unique_ptr<fenced_resource> fenced;
    if (fenced_port != 0) fenced = std::make_unique<fenced_resource>(fenced_port, kv.at("fenced_name"));
    w.shared_counter = ctr.get();
    w.fenced = fenced.get();
    history h;
    workload_result res;
    {
      client c(scenario_options(split(kv.at("nodes"), ',')));
      std::atomic<bool> stop{false};
      res = run_workload(c, w, h, stop, steady::now() + duration);
    }
    std::ofstream out(kv.at("out"), std::ios::trunc);
    out << h.serialize() << "C " << res.increments << "\n";
    out.close();
    return out ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "redlock worker failed: " << e.what() << std::endl;
    return 2;
  }
}

}  // namespace redlock::test
