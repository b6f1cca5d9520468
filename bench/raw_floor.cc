#include "raw_floor.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <stdexcept>

#include "protocol/scripts.h"

namespace redlock::bench {

namespace {

struct reply_ptr {
  redisReply* r = nullptr;
  ~reply_ptr() {
    if (r != nullptr) freeReplyObject(r);
  }
};

[[noreturn]] void fail(redisContext* c, const std::string& what) {
  throw std::runtime_error("raw floor: " + what + ": " +
                           (c != nullptr && c->err ? c->errstr : "unexpected reply"));
}

// Writes everything buffered on `c`.
void flush(redisContext* c) {
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) fail(c, "write");
  }
}

redisReply* read_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) fail(c, "read");
  return static_cast<redisReply*>(r);
}

void append(redisContext* c, std::initializer_list<std::string_view> args) {
  const char* argv[8];
  std::size_t lens[8];
  int n = 0;
  for (std::string_view a : args) {
    argv[n] = a.data();
    lens[n] = a.size();
    ++n;
  }
  if (redisAppendCommandArgv(c, n, argv, lens) != REDIS_OK) fail(c, "append");
}

void append_acquire(const raw_nodes& nodes, redisContext* c, floor_acquire how, const std::string& key,
                    const std::string& token) {
  if (how == floor_acquire::set_nx) {
    append(c, {"SET", key, token, "NX", "PX", "30000"});
  } else if (how == floor_acquire::library_set_get) {
    append(c, {"SET", key, token, "NX", "PX", "30000", "GET"});
  } else if (how == floor_acquire::set_get_time) {
    append(c, {"SET", key, token, "NX", "PX", "30000", "GET"});
    append(c, {"TIME"});
  } else {
    append(c, {"EVALSHA", nodes.acquire_sha(), "1", key, token, "30000"});
  }
}

void append_release(const raw_nodes& nodes, redisContext* c, const std::string& key,
                    const std::string& token) {
  append(c, {"EVALSHA", nodes.release_sha(), "1", key, token});
}

// True when the reply grants the lock: SET: +OK; the library's acquire script: :1,
// or an array whose first element is :1 (the script's shape varies by version).
bool granted(const redisReply* r) {
  if (r->type == REDIS_REPLY_ARRAY && r->elements > 0) r = r->element[0];
  return (r->type == REDIS_REPLY_STATUS && r->len == 2 && r->str[0] == 'O') ||
         (r->type == REDIS_REPLY_INTEGER && r->integer == 1);
}
// The same for `how`: SET ... NX ... GET answers nil when it set the key (it returns
// the old value, and there was none).
bool granted_as(floor_acquire how, const redisReply* r) {
  return how == floor_acquire::library_set_get || how == floor_acquire::set_get_time ? r->type == REDIS_REPLY_NIL
                                                                                      : granted(r);
}
// Reads the replies to one append_acquire() on `c`; true if it granted.
bool read_acquire(redisContext* c, floor_acquire how) {
  reply_ptr r{read_reply(c)};
  if (how == floor_acquire::set_get_time) {
    reply_ptr t{read_reply(c)};
    if (t.r->type != REDIS_REPLY_ARRAY || t.r->elements != 2) fail(c, "TIME");
  }
  return granted_as(how, r.r);
}
bool deleted(const redisReply* r) { return r->type == REDIS_REPLY_INTEGER && r->integer == 1; }

std::string load_script(redisContext* c, const char* body) {
  reply_ptr r;
  r.r = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", body));
  if (r.r == nullptr || r.r->type != REDIS_REPLY_STRING) fail(c, "SCRIPT LOAD");
  return std::string(r.r->str, r.r->len);
}

}  // namespace

std::string unique_key_suffix() {
  static std::atomic<std::uint64_t> n{0};
  return std::to_string(::getpid()) + ":" + std::to_string(n.fetch_add(1, std::memory_order_relaxed));
}

std::string fast_token() {
  thread_local std::uint64_t s = 0x9e3779b97f4a7c15ULL ^ static_cast<std::uint64_t>(::getpid()) ^
                                 static_cast<std::uint64_t>(bench_clock::now().time_since_epoch().count());
  auto next = [] {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  static const char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t v = next();
    for (int i = 0; i < 16; ++i, v >>= 4) out[static_cast<std::size_t>(half * 16 + i)] = digits[v & 15];
  }
  return out;
}

raw_nodes::raw_nodes(const std::vector<int>& ports) {
  const timeval tv{2, 0};
  for (int port : ports) {
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == nullptr || c->err) {
      std::string why = c != nullptr ? c->errstr : "out of memory";
      if (c != nullptr) redisFree(c);
      for (redisContext* o : ctx_) redisFree(o);
      throw std::runtime_error("raw floor: connect to 127.0.0.1:" + std::to_string(port) + ": " + why);
    }
    redisSetTimeout(c, tv);
    ctx_.push_back(c);
  }
  for (redisContext* c : ctx_) {
    release_sha_ = load_script(c, detail::kRelease);
    acquire_sha_ = load_script(c, detail::kAcquire);
  }
}

raw_nodes::~raw_nodes() {
  for (redisContext* c : ctx_) redisFree(c);
}

floor_result parallel_floor(raw_nodes& nodes, floor_acquire how, bench_clock::duration duration,
                            std::uint64_t max_pairs) {
  floor_result out;
  out.pair.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(max_pairs, 1u << 20)));
  const std::string prefix = "bench:floor:" + unique_key_suffix() + ":";
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  for (std::uint64_t i = 0; i < max_pairs; ++i) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    const std::string key = prefix + std::to_string(i);
    const std::string token = fast_token();
    for (std::size_t n = 0; n < nodes.size(); ++n) append_acquire(nodes, nodes.at(n), how, key, token);
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (!read_acquire(nodes.at(n), how)) ++out.errors;
    }
    const auto t1 = bench_clock::now();
    for (std::size_t n = 0; n < nodes.size(); ++n) append_release(nodes, nodes.at(n), key, token);
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      reply_ptr r{read_reply(nodes.at(n))};
      if (!deleted(r.r)) ++out.errors;
    }
    const auto t2 = bench_clock::now();
    out.acquire.add(t1 - t0);
    out.release.add(t2 - t1);
    out.pair.add(t2 - t0);
    ++out.pairs;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

namespace {

// Reads replies from every node until `quorum` of them satisfied `ok_reply` or not;
// returns how many were not ok among the first `quorum`. Then drains the rest
// (blocking) and stores when the quorum was reached in `at_quorum`.
template <class Ok>
std::uint64_t read_quorum(raw_nodes& nodes, std::size_t quorum, Ok ok_reply,
                          bench_clock::time_point& at_quorum) {
  const std::size_t n = nodes.size();
  std::vector<pollfd> fds(n);
  for (std::size_t i = 0; i < n; ++i) fds[i] = pollfd{nodes.at(i)->fd, POLLIN, 0};
  std::vector<bool> got(n, false);
  std::size_t have = 0;
  std::uint64_t bad = 0;
  while (have < quorum) {
    const int ready = ::poll(fds.data(), fds.size(), 2000);
    if (ready <= 0) fail(nullptr, "no reply within 2 s");
    for (std::size_t i = 0; i < n && have < quorum; ++i) {
      if (got[i] || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      redisContext* c = nodes.at(i);
      if (redisBufferRead(c) != REDIS_OK) fail(c, "read");
      void* r = nullptr;
      if (redisGetReplyFromReader(c, &r) != REDIS_OK) fail(c, "parse");
      if (r == nullptr) continue;  // partial reply: wait for the rest
      reply_ptr rp{static_cast<redisReply*>(r)};
      if (!ok_reply(rp.r)) ++bad;
      got[i] = true;
      fds[i].fd = -1;  // poll ignores negative descriptors
      ++have;
    }
  }
  at_quorum = bench_clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (!got[i]) reply_ptr drop{read_reply(nodes.at(i))};
  }
  return bad;
}

}  // namespace

floor_result quorum_floor(raw_nodes& nodes, std::size_t quorum, bench_clock::duration duration,
                          std::uint64_t max_pairs) {
  floor_result out;
  const std::string prefix = "bench:quorum:" + unique_key_suffix() + ":";
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  for (std::uint64_t i = 0; i < max_pairs; ++i) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    const std::string key = prefix + std::to_string(i);
    const std::string token = fast_token();
    for (std::size_t n = 0; n < nodes.size(); ++n)
      append_acquire(nodes, nodes.at(n), floor_acquire::set_nx, key, token);
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    bench_clock::time_point t1;
    out.errors += read_quorum(nodes, quorum, granted, t1);
    const auto t2 = bench_clock::now();
    for (std::size_t n = 0; n < nodes.size(); ++n) append_release(nodes, nodes.at(n), key, token);
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    bench_clock::time_point t3;
    out.errors += read_quorum(nodes, quorum, deleted, t3);
    // The drain of the late replies (t1..t2) is not part of the pair.
    out.acquire.add(t1 - t0);
    out.release.add(t3 - t2);
    out.pair.add((t1 - t0) + (t3 - t2));
    ++out.pairs;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

floor_result async_quorum_floor(raw_nodes& nodes, std::size_t quorum, bench_clock::duration duration,
                                std::uint64_t max_pairs) {
  floor_result out;
  const std::string prefix = "bench:aquorum:" + unique_key_suffix() + ":";
  const std::size_t n = nodes.size();
  // Per node, the phase numbers of the requests whose replies are still to come.
  std::vector<std::deque<std::uint64_t>> waiting(n);
  std::vector<pollfd> fds(n);
  std::uint64_t phase = 0;
  // Reads what has come; counts the current phase's good replies in `got`.
  auto read_ready = [&](int timeout_ms, bool (*ok)(const redisReply*), std::size_t& got) {
    for (std::size_t i = 0; i < n; ++i) fds[i] = pollfd{nodes.at(i)->fd, static_cast<short>(waiting[i].empty() ? 0 : POLLIN), 0};
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
    for (std::size_t i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      redisContext* c = nodes.at(i);
      if (redisBufferRead(c) != REDIS_OK) fail(c, "read");
      for (;;) {
        void* r = nullptr;
        if (redisGetReplyFromReader(c, &r) != REDIS_OK) fail(c, "parse");
        if (r == nullptr) break;
        reply_ptr rp{static_cast<redisReply*>(r)};
        const std::uint64_t of = waiting[i].front();
        waiting[i].pop_front();
        if (of == phase) {
          if (ok(rp.r)) {
            ++got;
          } else {
            ++out.errors;
          }
        }
      }
    }
  };
  auto run_phase = [&](bool (*ok)(const redisReply*)) {
    std::size_t got = 0;
    while (got < quorum) {
      read_ready(2000, ok, got);
      bool any = false;
      for (const auto& w : waiting) any = any || !w.empty();
      if (!any) break;  // every reply in and no quorum: counted as errors
    }
  };
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  for (std::uint64_t i = 0; i < max_pairs; ++i) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    const std::string key = prefix + std::to_string(i);
    const std::string token = fast_token();
    ++phase;
    for (std::size_t k = 0; k < n; ++k) {
      append_acquire(nodes, nodes.at(k), floor_acquire::set_nx, key, token);
      waiting[k].push_back(phase);
    }
    for (std::size_t k = 0; k < n; ++k) flush(nodes.at(k));
    run_phase(granted);
    const auto t1 = bench_clock::now();
    ++phase;
    for (std::size_t k = 0; k < n; ++k) {
      append_release(nodes, nodes.at(k), key, token);
      waiting[k].push_back(phase);
    }
    for (std::size_t k = 0; k < n; ++k) flush(nodes.at(k));
    run_phase(deleted);
    const auto t2 = bench_clock::now();
    out.acquire.add(t1 - t0);
    out.release.add(t2 - t1);
    out.pair.add(t2 - t0);
    ++out.pairs;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  // Drain the late replies so the contexts stay in step for the next user.
  ++phase;
  const auto drain_until = bench_clock::now() + std::chrono::seconds(2);
  std::size_t ignored = 0;
  for (;;) {
    bool any = false;
    for (const auto& w : waiting) any = any || !w.empty();
    if (!any || bench_clock::now() >= drain_until) break;
    read_ready(100, granted, ignored);
  }
  return out;
}

floor_result sequential_floor(raw_nodes& nodes, bench_clock::duration duration, std::uint64_t max_pairs) {
  floor_result out;
  const std::string prefix = "bench:seq:" + unique_key_suffix() + ":";
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  for (std::uint64_t i = 0; i < max_pairs; ++i) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    const std::string key = prefix + std::to_string(i);
    const std::string token = fast_token();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      append_acquire(nodes, nodes.at(n), floor_acquire::set_nx, key, token);
      flush(nodes.at(n));
      reply_ptr r{read_reply(nodes.at(n))};
      if (!granted(r.r)) ++out.errors;
    }
    const auto t1 = bench_clock::now();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      append_release(nodes, nodes.at(n), key, token);
      flush(nodes.at(n));
      reply_ptr r{read_reply(nodes.at(n))};
      if (!deleted(r.r)) ++out.errors;
    }
    const auto t2 = bench_clock::now();
    out.acquire.add(t1 - t0);
    out.release.add(t2 - t1);
    out.pair.add(t2 - t0);
    ++out.pairs;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

floor_result pipelined_floor(raw_nodes& nodes, int batch, bench_clock::duration duration,
                             std::uint64_t max_rounds, floor_acquire how) {
  floor_result out;
  const std::string prefix = "bench:pipe:" + unique_key_suffix() + ":";
  const auto b = static_cast<std::size_t>(batch);
  std::vector<std::string> keys(b), tokens(b);
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  std::uint64_t seq = 0;
  for (std::uint64_t round = 0; round < max_rounds; ++round) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    for (std::size_t k = 0; k < b; ++k) {
      keys[k] = prefix + std::to_string(seq++);
      tokens[k] = fast_token();
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      for (std::size_t k = 0; k < b; ++k) append_acquire(nodes, nodes.at(n), how, keys[k], tokens[k]);
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      for (std::size_t k = 0; k < b; ++k) {
        if (!read_acquire(nodes.at(n), how)) ++out.errors;
      }
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      for (std::size_t k = 0; k < b; ++k) append_release(nodes, nodes.at(n), keys[k], tokens[k]);
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) flush(nodes.at(n));
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      for (std::size_t k = 0; k < b; ++k) {
        reply_ptr r{read_reply(nodes.at(n))};
        if (!deleted(r.r)) ++out.errors;
      }
    }
    out.pair.add(bench_clock::now() - t0);
    out.pairs += b;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

std::vector<summary> ping_per_node(raw_nodes& nodes, std::uint64_t count, bench_clock::duration duration) {
  std::vector<summary> out;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    latencies l;
    const auto deadline = bench_clock::now() + duration;
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto t0 = bench_clock::now();
      if (t0 >= deadline) break;
      append(nodes.at(n), {"PING"});
      flush(nodes.at(n));
      reply_ptr r{read_reply(nodes.at(n))};
      if (r.r->type != REDIS_REPLY_STATUS) fail(nodes.at(n), "PING");
      l.add(bench_clock::now() - t0);
    }
    out.push_back(l.summarize());
  }
  return out;
}

}  // namespace redlock::bench
