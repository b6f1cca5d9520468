// Scenario 7: a client paused past its TTL. A worker process acquires the lock
// with fencing, reads a counter, and is SIGSTOPped (the whole process: its loop
// thread and watchdog too) for longer than the TTL. Meanwhile another client
// acquires, increments the counter and writes the fenced resource. Then the worker
// is SIGCONTed and finishes its critical section as a paused holder would.
//
// Expected, and asserted:
//  - the resumed holder is told its validity ran out: remaining_validity() is 0
//    and extend() fails lock_lost without reaching any node, before anything
//    could succeed (so a resumed holder that checks never writes);
//  - with fencing, the resource refuses the resumed holder's write (0 stale
//    writes accepted; the second holder's token is higher);
//  - without fencing, the resumed holder's write of the counter loses the other
//    holder's update: lost updates are expected. This is the documented
//    non-guarantee (docs/safety-harness.md): a lock alone cannot protect effects
//    past its validity; only the resource can, by checking fencing tokens.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "fault_util.h"

namespace redlock::test {
namespace {

constexpr auto kTtl = 1000ms;

bool file_exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    if (tok.rfind(key + "=", 0) == 0) return tok.substr(key.size() + 1);
  }
  return "";
}

// Waits until the process is in state T (stopped), bounded.
bool wait_stopped(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rp = stat.rfind(')');
    if (rp != std::string::npos && rp + 2 < stat.size() && (stat[rp + 2] == 'T' || stat[rp + 2] == 't'))
      return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

TEST(ClientPause, paused_holder_learns_validity_ran_out_and_fencing_refuses_its_write) {
  redis_cluster nodes(5);
  redis_node store;
  client other(scenario_options(nodes.uris()));
  ASSERT_TRUE(wait_connected(other));
  figures fig;
  fig.scenario = "client_pause";
  std::int64_t lost_updates = 0;
  std::uint64_t stale_accepted = 0, refused = 0;
  fig.runs = repeat_for_soak(
      [&](int round) {
        const std::string res = "paused-" + std::to_string(round);
        const std::string sync =
            "/tmp/redlock-test-" + std::to_string(::getpid()) + "-pause-" + std::to_string(round);
        ::unlink((sync + ".ready").c_str());
        ::unlink((sync + ".go").c_str());
        worker_spec spec;
        spec.mode = "pause_holder";
        spec.nodes = nodes.uris();
        spec.w.resource = res;
        spec.w.owner = "paused";
        spec.w.ttl = kTtl;
        spec.w.fencing = true;
        spec.counter_port = store.port();
        spec.counter_key = res + ":counter";
        spec.fenced_port = store.port();
        spec.fenced_name = res + ":resource";
        // Odd rounds hold the lock with a watchdog (which the pause stops too).
        spec.extra = {"sync=" + sync, std::string("auto_extend=") + (round % 2 == 1 ? "1" : "0")};
        worker_process w(spec);
        ASSERT_TRUE([&] {
          for (int i = 0; i < 1000 && !file_exists(sync + ".ready"); ++i) std::this_thread::sleep_for(10ms);
          return file_exists(sync + ".ready");
        }()) << "the worker never got the lock";
        // The pause: the holder's whole process stops, for longer than the TTL.
        ASSERT_EQ(::kill(w.pid(), SIGSTOP), 0);
        ASSERT_TRUE(wait_stopped(w.pid()));
        ++fig.faults;
        std::this_thread::sleep_for(kTtl + 200ms);
        // Another client gets the lock and does its work.
        acquire_options o = once(kTtl);
        o.fencing = true;
        acquire_result second;
        for (int i = 0; i < 50 && !(second = other.acquire(res, o)); ++i) std::this_thread::sleep_for(20ms);
        ASSERT_TRUE(second) << second.report.message();
        redis_counter ctr(store.port(), res + ":counter");
        fenced_resource fenced(store.port(), res + ":resource");
        ctr.write(ctr.read() + 1);
        ASSERT_TRUE(second.lock.fence().has_value());
        const std::uint64_t second_fence = *second.lock.fence();  // the handle forgets it on release
        EXPECT_TRUE(fenced.write(second_fence, "second"));
        EXPECT_TRUE(second.lock.release());
        fig.operations += 2;
        // Resume the paused holder.
        { std::ofstream(sync + ".go") << "go\n"; }
        ASSERT_EQ(::kill(w.pid(), SIGCONT), 0);
        ASSERT_TRUE(w.wait(30s));
        ASSERT_EQ(w.exit_code(), 0) << w.output();
        const std::string out = w.output();
        fig.operations += 4;
        const std::uint64_t first_fence = std::stoull(field(out, "fence"));
        EXPECT_GT(second_fence, first_fence);
        EXPECT_EQ(field(out, "remaining_ms"), "0") << out;
        EXPECT_EQ(field(out, "extend"), "lock_lost") << "an extend after the pause must not succeed: " << out;
        EXPECT_EQ(field(out, "fenced_write"), "refused") << out;
        refused += field(out, "fenced_write") == "refused" ? 1 : 0;
        // Without fencing the counter lost the second holder's increment.
        const std::int64_t expected = std::stoll(field(out, "read")) + 2;
        const auto actual = std::stoll(store.get(res + ":counter").value_or("0"));
        EXPECT_EQ(expected - actual, 1) << "the harness should see the unfenced lost update";
        lost_updates += expected - actual;
        const std::size_t stale = count_stale_writes(fenced.accepted());
        EXPECT_EQ(stale, 0u);
        stale_accepted += stale;
        ::unlink((sync + ".ready").c_str());
        ::unlink((sync + ".go").c_str());
      },
      /*min_rounds=*/2);
  fig.violations = stale_accepted;
  fig.extra = "stale_fenced_writes_refused=" + std::to_string(refused) +
              " unfenced_lost_updates=" + std::to_string(lost_updates) + " (expected: the non-guarantee)";
  fig.publish();
}

}  // namespace

// The paused holder (worker mode "pause_holder"): acquire with fencing, read the
// counter, announce "<sync>.ready", wait for "<sync>.go" (the test stops and
// resumes this process in between), then finish the critical section without
// checking anything and report what the library said.
int pause_holder_main(const std::map<std::string, std::string>& kv) {
  client c(scenario_options([&] {
    std::vector<std::string> out;
    std::istringstream in(kv.at("nodes"));
    std::string u;
    while (std::getline(in, u, ',')) out.push_back(u);
    return out;
  }()));
  acquire_options o;
  o.ttl = std::chrono::milliseconds(std::stoll(kv.at("ttl")));
  o.fencing = true;
  o.auto_extend = kv.count("auto_extend") != 0 && kv.at("auto_extend") == "1";
  o.retry.max_attempts = 20;
  auto r = c.acquire(kv.at("resource"), o);
  if (!r) {
    std::cerr << "pause_holder: acquire failed: " << r.report.message() << std::endl;
    return 4;
  }
  redis_counter ctr(std::stoi(kv.at("counter_port")), kv.at("counter_key"));
  fenced_resource fenced(std::stoi(kv.at("fenced_port")), kv.at("fenced_name"));
  const std::uint64_t fence = *r.lock.fence();
  const std::int64_t v = ctr.read();
  const std::string sync = kv.at("sync");
  { std::ofstream(sync + ".ready") << "ready\n"; }
  for (int i = 0; i < 30000 && ::access((sync + ".go").c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Resumed. What does the library tell the holder now?
  const auto remaining = r.lock.remaining_validity();
  const report ext = r.lock.extend(o.ttl);
  // A holder that does not check: its writes.
  ctr.write(v + 1);
  const bool accepted = fenced.write(fence, "paused");
  (void)r.lock.release();
  std::ofstream out(kv.at("out"), std::ios::trunc);
  out << "fence=" << fence << " read=" << v << " remaining_ms=" << remaining.count()
      << " extend=" << error_name(ext.error) << " fenced_write=" << (accepted ? "accepted" : "refused")
      << "\n";
  return out ? 0 : 3;
}

}  // namespace redlock::test
