// Scenario 2: baseline contention, no faults. Ten clients fight over one resource
// on five nodes: first as ten threads (each with its own client), then as ten
// separate processes (the test binary re-executed as a worker). Every critical
// section reads a counter, sleeps, writes it back. Checked: (M) no two grants of
// different owners overlap, (S) no update is lost, and in the process run, which
// uses fencing, (F) tokens strictly increase and the fenced resource accepts no
// stale write.
#include <gtest/gtest.h>

#include <thread>

#include "fault_util.h"

namespace redlock::test {
namespace {

constexpr int kClients = 10;
constexpr auto kRoundLength = 4000ms;

std::string first_overlaps(const history& h, const std::vector<overlap>& v) {
  std::string out;
  const auto g = h.grants();
  for (std::size_t i = 0; i < v.size() && i < 5; ++i) out += "\n  " + describe(g, v[i]);
  return out;
}

class Contention : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    nodes_ = new redis_cluster(5);
    store_ = new redis_node();
  }
  static void TearDownTestSuite() {
    delete nodes_;
    delete store_;
    nodes_ = nullptr;
    store_ = nullptr;
  }
  static redis_cluster* nodes_;
  static redis_node* store_;  // the counter and the fenced resource of the process run
};
redis_cluster* Contention::nodes_ = nullptr;
redis_node* Contention::store_ = nullptr;

TEST_F(Contention, ten_threads_no_violation_of_mutual_exclusion_or_lost_update) {
  figures fig;
  fig.scenario = "contention_threads";
  std::uint64_t grants = 0, skipped = 0;
  fig.runs = repeat_for_soak([&](int round) {
    const std::string res = "contend-threads-" + std::to_string(round);
    std::vector<std::unique_ptr<client>> clients;
    for (int i = 0; i < kClients; ++i)
      clients.push_back(std::make_unique<client>(scenario_options(nodes_->uris())));
    for (auto& c : clients) ASSERT_TRUE(wait_connected(*c));
    history h;
    memory_counter ctr;
    std::atomic<bool> stop{false};
    std::vector<workload_result> results(kClients);
    std::vector<std::thread> threads;
    const auto until = steady::now() + kRoundLength;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        workload w;
        w.resource = res;
        w.owner = "t" + std::to_string(i);
        w.shared_counter = &ctr;
        results[static_cast<std::size_t>(i)] =
            run_workload(*clients[static_cast<std::size_t>(i)], w, h, stop, until);
      });
    }
    for (auto& t : threads) t.join();
    std::int64_t increments = 0;
    for (const auto& r : results) {
      increments += r.increments;
      skipped += r.skipped_writes;
    }
    const auto overlaps = check_mutual_exclusion(h.grants());
    const counter_check s{increments, ctr.read()};
    EXPECT_TRUE(overlaps.empty()) << overlaps.size() << " overlaps" << first_overlaps(h, overlaps);
    EXPECT_EQ(s.lost(), 0) << "expected " << s.expected << ", counter " << s.actual;
    EXPECT_GT(h.grants().size(), 30u) << "too little progress to mean anything";
    fig.operations += h.operations();
    fig.violations += overlaps.size() + static_cast<std::uint64_t>(std::max<std::int64_t>(0, s.lost()));
    grants += h.grants().size();
  });
  fig.extra = "grants=" + std::to_string(grants) + " skipped_writes=" + std::to_string(skipped);
  fig.publish();
}

TEST_F(Contention, ten_processes_no_violation_and_fencing_tokens_increase) {
  figures fig;
  fig.scenario = "contention_processes";
  std::uint64_t grants = 0, fenced_writes = 0;
  fig.runs = repeat_for_soak([&](int round) {
    const std::string res = "contend-procs-" + std::to_string(round);
    const std::string counter_key = res + ":counter";
    const std::string fenced_name = res + ":resource";
    std::vector<std::unique_ptr<worker_process>> workers;
    for (int i = 0; i < kClients; ++i) {
      worker_spec spec;
      spec.nodes = nodes_->uris();
      spec.w.resource = res;
      spec.w.owner = "p" + std::to_string(i);
      spec.w.fencing = true;
      spec.duration = kRoundLength;
      spec.counter_port = store_->port();
      spec.counter_key = counter_key;
      spec.fenced_port = store_->port();
      spec.fenced_name = fenced_name;
      workers.push_back(std::make_unique<worker_process>(spec));
    }
    history h;
    std::int64_t increments = 0;
    for (auto& w : workers) {
      ASSERT_TRUE(w->wait(kRoundLength + 30s)) << "worker " << w->pid() << " did not finish";
      ASSERT_EQ(w->exit_code(), 0);
      h.merge(w->result_history());
      increments += w->increments();
    }
    const auto all = h.grants();
    const auto overlaps = check_mutual_exclusion(all);
    const auto regressions = check_fence_order(all);
    fenced_resource resource(store_->port(), fenced_name);
    const auto accepted = resource.accepted();
    const std::size_t stale = count_stale_writes(accepted);
    const auto value = store_->get(counter_key);
    const counter_check s{increments, value ? std::stoll(*value) : 0};
    EXPECT_TRUE(overlaps.empty()) << overlaps.size() << " overlaps" << first_overlaps(h, overlaps);
    EXPECT_EQ(s.lost(), 0) << "expected " << s.expected << ", counter " << s.actual;
    EXPECT_TRUE(regressions.empty()) << regressions.size() << " fence regressions";
    EXPECT_EQ(stale, 0u);
    EXPECT_GT(all.size(), 10u) << "too little progress to mean anything";
    for (const auto& g : all) EXPECT_TRUE(g.fence.has_value());
    fig.operations += h.operations();
    fig.violations += overlaps.size() + regressions.size() + stale +
                      static_cast<std::uint64_t>(std::max<std::int64_t>(0, s.lost()));
    grants += all.size();
    fenced_writes += accepted.size();
  });
  fig.extra = "grants=" + std::to_string(grants) + " fenced_writes_accepted=" + std::to_string(fenced_writes);
  fig.publish();
}

}  // namespace
}  // namespace redlock::test
