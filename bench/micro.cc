// Google Benchmark micro-benchmarks of the pure parts of the library: the quorum
// decision, validity math, token generation, SHA-1, reply classification, URI
// parsing, the retry schedule, and (for reference) hiredis's command encoding.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pure/decision.h"
#include "redlock/client.h"
#include "redlock/metrics.h"
#include "redlock/observer.h"
#include "redlock/testing.h"
#include "protocol/reply.h"
#include "pure/retry.h"
#include "protocol/scripts.h"
#include "pure/sha1.h"
#include "pure/token.h"
#include "pure/uri.h"

namespace {

using namespace redlock;
using namespace redlock::detail;

// Votes of an acquire that reached quorum on n nodes, the rest still pending.
std::vector<vote> quorum_votes(std::size_t n) {
  std::vector<vote> v(n);
  for (std::size_t i = 0; i < quorum_of(n); ++i) v[i].status = node_status::ok;
  return v;
}

void BM_count_votes_and_decide(benchmark::State& state) {
  const std::vector<vote> votes = quorum_votes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    const tally t = count_votes(votes);
    benchmark::DoNotOptimize(decide(t));
  }
}
BENCHMARK(BM_count_votes_and_decide)->Arg(1)->Arg(3)->Arg(5)->Arg(7);

void BM_failure_reason_contended(benchmark::State& state) {
  std::vector<vote> votes(5);
  votes[0].status = node_status::ok;
  votes[1].status = node_status::held;
  votes[2].status = node_status::held;
  votes[3].status = node_status::held;
  votes[4].status = node_status::timeout;
  for (auto _ : state) benchmark::DoNotOptimize(failure_reason(refusal::held, votes));
}
BENCHMARK(BM_failure_reason_contended);

void BM_validity_of(benchmark::State& state) {
  milliseconds ttl(30000);
  microseconds elapsed(250);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ttl);
    benchmark::DoNotOptimize(elapsed);
    benchmark::DoNotOptimize(validity_of(ttl, elapsed, 0.01));
  }
}
BENCHMARK(BM_validity_of);

void BM_make_token(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(make_token());
}
BENCHMARK(BM_make_token);

void BM_sha1_hex_script(benchmark::State& state) {
  const std::string body = kRelease;
  for (auto _ : state) benchmark::DoNotOptimize(sha1_hex(body));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}
BENCHMARK(BM_sha1_hex_script);

// A granted acquire as the acquire scripts answer it (script_id::acquire, the
// fallback for servers without SET ... NX ... GET, and script_id::acquire_fenced):
// {1, fence counter, server seconds, server microseconds}.
struct acquire_reply {
  char counter[8] = "41";
  redisReply one{}, fence{};
  redisReply* elems[2] = {&one, &fence};
  redisReply top{};

  acquire_reply() {
    one.type = REDIS_REPLY_INTEGER;
    one.integer = 1;
    set_str(fence, counter);
    top.type = REDIS_REPLY_ARRAY;
    top.elements = 2;
    top.element = elems;
  }
  static void set_str(redisReply& r, char* text) {
    r.type = REDIS_REPLY_STRING;
    r.str = text;
    r.len = std::strlen(text);
  }
};

// Measures classify_reply on `r`; fails the benchmark if the reply no longer
// classifies as a grant (the script's reply shape changed: update this file).
void classify_granted(benchmark::State& state, script_id script, const redisReply* r) {
  if (classify_reply(script, r).v.status != node_status::ok) {
    state.SkipWithError("reply does not classify as granted: the script's reply shape changed");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(classify_reply(script, r));
}

// The usual acquire, SET key token NX PX ttl GET (script_id::acquire_set): nil when
// it set the key (granted), the holder's token as a bulk string when it did not.
void BM_classify_reply_acquire_set_granted(benchmark::State& state) {
  redisReply r{};
  r.type = REDIS_REPLY_NIL;
  classify_granted(state, script_id::acquire_set, &r);
}
BENCHMARK(BM_classify_reply_acquire_set_granted);

void BM_classify_reply_acquire_set_held(benchmark::State& state) {
  char holder[] = "0123456789abcdef0123456789abcdef";
  redisReply r{};
  r.type = REDIS_REPLY_STRING;
  r.str = holder;
  r.len = sizeof holder - 1;
  if (classify_reply(script_id::acquire_set, &r).v.status != node_status::held) {
    state.SkipWithError("a bulk-string reply to SET NX PX GET does not classify as held: update this file");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(classify_reply(script_id::acquire_set, &r));
}
BENCHMARK(BM_classify_reply_acquire_set_held);

// The acquire script's grant ({1, counter}; the TIME is pipelined behind it).
void BM_classify_reply_acquire_granted(benchmark::State& state) {
  acquire_reply r;
  classify_granted(state, script_id::acquire, &r.top);
}
BENCHMARK(BM_classify_reply_acquire_granted);

void BM_classify_reply_fenced_granted(benchmark::State& state) {
  acquire_reply r;
  classify_granted(state, script_id::acquire_fenced, &r.top);
}
BENCHMARK(BM_classify_reply_fenced_granted);

void BM_classify_reply_release_deleted(benchmark::State& state) {
  redisReply r{};
  r.type = REDIS_REPLY_INTEGER;
  r.integer = 1;
  classify_granted(state, script_id::release, &r);
}
BENCHMARK(BM_classify_reply_release_deleted);

void BM_classify_reply_error(benchmark::State& state) {
  char text[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
  redisReply r{};
  r.type = REDIS_REPLY_ERROR;
  r.str = text;
  r.len = sizeof text - 1;
  for (auto _ : state) benchmark::DoNotOptimize(classify_reply(script_id::acquire, &r));
}
BENCHMARK(BM_classify_reply_error);

void BM_parse_node_uri(benchmark::State& state) {
  const std::string uri =
      state.range(0) == 0 ? "redis://127.0.0.1:6379" : "redis://alice:s%40cret@redis-3.example:6380/2";
  for (auto _ : state) {
    node_address a;
    std::string err;
    benchmark::DoNotOptimize(parse_node_uri(uri, a, err));
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_parse_node_uri)->Arg(0)->Arg(1);

void BM_redact_uri(benchmark::State& state) {
  const std::string uri = "redis://alice:secret@redis-3.example:6380/2";
  for (auto _ : state) benchmark::DoNotOptimize(redact_uri(uri));
}
BENCHMARK(BM_redact_uri);

void BM_retry_delay(benchmark::State& state) {
  retry_policy p;
  jitter_rng rng(42);
  int attempt = 2;
  for (auto _ : state) {
    benchmark::DoNotOptimize(retry_delay(p, attempt, rng.next()));
    attempt = attempt == 8 ? 2 : attempt + 1;
  }
}
BENCHMARK(BM_retry_delay);

// Reference: what encoding one EVALSHA acquire costs in hiredis's
// redisFormatCommandArgv (what the library's transport used before c67eeb1; it now
// encodes each round's command once with its own RESP writer, as below).
void BM_hiredis_format_evalsha(benchmark::State& state) {
  const std::string sha = get_script(script_id::acquire).sha();
  const std::string key = "lock:orders:42", token = make_token(), ttl = "30000";
  const char* argv[] = {"EVALSHA", sha.c_str(), "1", key.c_str(), token.c_str(), ttl.c_str()};
  const std::size_t lens[] = {7, sha.size(), 1, key.size(), token.size(), ttl.size()};
  for (auto _ : state) {
    char* out = nullptr;
    const int n = redisFormatCommandArgv(&out, 6, argv, lens);
    benchmark::DoNotOptimize(n);
    std::free(out);
  }
}
BENCHMARK(BM_hiredis_format_evalsha);

// Reference for the above: the same command encoded by a minimal RESP writer into a
// reused buffer (no printf, no allocation). Not library code: the library's own
// encoder (lib/protocol/resp.cc, internal) works the same way.
void append_bulk(std::string& out, const char* s, std::size_t n) {
  char digits[24];
  std::size_t len = 0;
  for (std::size_t v = n; len == 0 || v != 0; v /= 10) digits[len++] = static_cast<char>('0' + v % 10);
  out += '$';
  while (len > 0) out += digits[--len];
  out += "\r\n";
  out.append(s, n);
  out += "\r\n";
}

void BM_reference_resp_writer_evalsha(benchmark::State& state) {
  const std::string sha = get_script(script_id::acquire).sha();
  const std::string key = "lock:orders:42", token = make_token(), ttl = "30000";
  const char* argv[] = {"EVALSHA", sha.c_str(), "1", key.c_str(), token.c_str(), ttl.c_str()};
  const std::size_t lens[] = {7, sha.size(), 1, key.size(), token.size(), ttl.size()};
  std::string out;
  out.reserve(256);
  for (auto _ : state) {
    out.clear();
    out += "*6\r\n";
    for (std::size_t i = 0; i < 6; ++i) append_bulk(out, argv[i], lens[i]);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_reference_resp_writer_evalsha);

}  // namespace

BENCHMARK_MAIN();

namespace {

// The cost of the observer event sites: acquire + release pairs of a real client
// over the simulated world (redlock/testing.h: one thread, virtual time, no
// network), so the CPU time is the client's and the simulator's alone, without the
// noise of real sockets. Arg 0: no observer; 1: one no-op observer; 2: as 1, plus
// node 0 answering in 2 ms and a 1 ms slow_node_threshold (a node_slow event per reply of node 0).
// bench_observer_factory: the observer of arg 1 and 2 (default: a no-op one), a
// hook for measuring another observer (the metrics adapter) the same way.
std::function<std::shared_ptr<redlock::observer>()> bench_observer_factory = [] {
  return std::make_shared<redlock::observer>();
};

void BM_sim_pair_observers(benchmark::State& state) {
  redlock::testing::world_options wo;
  wo.min_latency_us = 100;
  wo.max_latency_us = 100;
  redlock::testing::world w(wo);
  redlock::client_options co;
  if (state.range(0) >= 1) co.observers.push_back(bench_observer_factory());
  if (state.range(0) >= 2) co.slow_node_threshold = std::chrono::milliseconds(1);
  if (state.range(0) >= 2) w.set_node_latency(0, 1000, 1000);
  auto c = w.make_client(co);
  if (!c->ping()) state.SkipWithError("the simulated nodes did not answer");
  redlock::acquire_options o;
  o.ttl = std::chrono::seconds(10);
  o.retry = redlock::retry_policy::once();
  for (auto _ : state) {
    auto r = c->acquire("bench-observer", o);
    if (!r || r.lock.release().error) {
      state.SkipWithError("pair failed");
      break;
    }
  }
}
BENCHMARK(BM_sim_pair_observers)->Arg(0)->Arg(1)->Arg(2);

// The same pairs with the metrics adapter (redlock/metrics.h) as the observer.
void BM_sim_pair_metrics(benchmark::State& state) {
  const auto saved = bench_observer_factory;
  bench_observer_factory = [] { return std::make_shared<redlock::metrics>(); };
  BM_sim_pair_observers(state);
  bench_observer_factory = saved;
}
BENCHMARK(BM_sim_pair_metrics)->Arg(1);

}  // namespace
