// Leader election on real redis-server nodes: one leader among five candidates,
// resign hands over, observe never names a leader whose lock a quorum does not
// hold, demotion fires the loss token, and a history of beliefs never overlaps.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "test_util.h"

namespace redlock::test {
namespace {

using steady = std::chrono::steady_clock;

campaign_options fast(std::chrono::milliseconds ttl = 2000ms) {
  campaign_options o;
  o.ttl = ttl;
  o.retry_delay = 50ms;
  return o;
}

struct candidates {
  explicit candidates(redis_cluster& cl, int n) {
    for (int i = 0; i < n; ++i) {
      clients.push_back(std::make_unique<client>(options_for(cl.uris())));
      EXPECT_TRUE(wait_connected(*clients.back()));
      elections.push_back(std::make_unique<election>(*clients.back()));
    }
  }
  std::vector<std::unique_ptr<client>> clients;
  std::vector<std::unique_ptr<election>> elections;
};

std::string lock_key(const std::string& role) { return election::resource_for(role); }

TEST(election, one_of_five_candidates_leads_and_observe_names_it) {
  std::vector<std::promise<campaign_result>> results(5);  // outlives the clients: their callbacks set it
  redis_cluster cl(5);
  candidates c(cl, 5);
  for (int i = 0; i < 5; ++i) {
    c.elections[i]->campaign_async("svc", "cand-" + std::to_string(i), fast(),
                                   [&results, i](campaign_result r) { results[i].set_value(std::move(r)); });
  }
  // Exactly one is elected; the others keep waiting.
  int leader = -1;
  ASSERT_TRUE(eventually([&] { return c.elections[0]->observe("svc").identity.has_value(); }));
  const leader_info seen = c.elections[0]->observe("svc");
  ASSERT_TRUE(seen.report) << seen.report.message();
  ASSERT_TRUE(seen.identity);
  leader = std::stoi(seen.identity->substr(5));
  auto won = results[leader].get_future();
  ASSERT_EQ(won.wait_for(2s), std::future_status::ready);
  campaign_result r = won.get();
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(r.leadership.is_leader());
  EXPECT_GT(r.leadership.term(), 0u);
  EXPECT_EQ(seen.term, r.leadership.term());
  EXPECT_GT(seen.ttl.count(), 0);
  EXPECT_LE(seen.ttl.count(), 2000);
  // Nobody else was elected meanwhile (their futures are still pending).
  std::vector<std::future<campaign_result>> others;
  for (int i = 0; i < 5; ++i) {
    if (i != leader) others.push_back(results[i].get_future());
  }
  for (auto& f : others) EXPECT_EQ(f.wait_for(0ms), std::future_status::timeout);

  // Resign: one of the waiting candidates takes over within a few retry delays.
  const auto resigned_at = steady::now();
  ASSERT_TRUE(r.leadership.resign());
  EXPECT_FALSE(r.leadership.is_leader());
  EXPECT_TRUE(r.leadership.loss_token().stop_requested());
  int next = -1;
  campaign_result r2;
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t k = 0; k < others.size(); ++k) {
          if (others[k].valid() && others[k].wait_for(0ms) == std::future_status::ready) {
            r2 = others[k].get();
            next = static_cast<int>(k);
            return true;
          }
        }
        return false;
      },
      2000ms));
  const auto handover = steady::now() - resigned_at;
  ASSERT_TRUE(r2) << r2.report.message();
  EXPECT_LT(handover, 500ms);  // retry_delay 50 ms + the acquire, fence and publish rounds
  EXPECT_GT(r2.leadership.term(), r.leadership.term());
  const leader_info after = c.elections[0]->observe("svc");
  ASSERT_TRUE(after.identity);
  EXPECT_EQ(*after.identity, r2.leadership.identity());
  EXPECT_EQ(after.term, r2.leadership.term());
  (void)next;
  ASSERT_TRUE(r2.leadership.resign());
  // The remaining candidates' campaigns end with the clients (cancelled).
}

TEST(election, observe_reports_none_for_a_free_role_and_for_a_stale_record) {
  redis_cluster cl(3);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  leader_info none = e.observe("free");
  ASSERT_TRUE(none.report) << none.report.message();
  EXPECT_FALSE(none.identity);
  EXPECT_FALSE(none.term);
  EXPECT_EQ(none.ttl.count(), 0);

  campaign_result r = e.campaign("r", "me", fast());
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_EQ(e.observe("r").identity, std::optional<std::string>("me"));
  const std::string key = lock_key("r");
  // The lock key deleted on a majority (as if expired there): the record is still
  // on every node, yet observe names nobody.
  cl[0].command({"DEL", key});
  cl[1].command({"DEL", key});
  EXPECT_TRUE(cl[0].exists(key + ":leader"));
  leader_info stale = e.observe("r");
  ASSERT_TRUE(stale.report);
  EXPECT_FALSE(stale.identity);
  EXPECT_FALSE(stale.term);
  // The watchdog's next extension finds the keys gone on a majority: demoted.
  EXPECT_TRUE(eventually([&] { return r.leadership.loss_token().stop_requested(); }, 3000ms));
  EXPECT_FALSE(r.leadership.is_leader());
}

TEST(election, a_record_left_by_a_resigned_leader_names_nobody_once_another_holds_the_lock) {
  redis_cluster cl(3);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  campaign_result r = e.campaign("r", "old", fast());
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(r.leadership.resign());
  EXPECT_TRUE(cl[0].exists(lock_key("r") + ":leader"));  // the record stays (one small key per role)
  EXPECT_FALSE(e.observe("r").identity);
  // A plain acquire of the election's resource (no record written): nobody leads.
  acquire_result plain = c.acquire(election::resource_for("r"), once(2000ms));
  ASSERT_TRUE(plain) << plain.report.message();
  const leader_info seen = e.observe("r");
  ASSERT_TRUE(seen.report);
  EXPECT_FALSE(seen.identity);
  ASSERT_TRUE(plain.lock.release());
}

TEST(election, on_demoted_runs_once_when_the_watchdog_loses_the_leadership) {
  redis_cluster cl(3);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  std::atomic<int> demotions{0};
  std::promise<std::error_code> why;
  campaign_options o = fast(1500ms);
  o.on_demoted = [&](const report& rep) {
    if (demotions.fetch_add(1) == 0) why.set_value(rep.error);
  };
  campaign_result r = e.campaign("d", "me", o);
  ASSERT_TRUE(r) << r.report.message();
  const std::string key = lock_key("d");
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"DEL", key});
  auto f = why.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(f.get(), make_error_code(errc::lock_lost));
  EXPECT_TRUE(r.leadership.loss_token().stop_requested());
  EXPECT_FALSE(r.leadership.is_leader());
  EXPECT_FALSE(e.observe("d").identity);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(demotions.load(), 1);
}

TEST(election, campaign_with_a_deadline_fails_contended_while_another_leads) {
  redis_cluster cl(3);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  campaign_result r = e.campaign("x", "a", fast());
  ASSERT_TRUE(r) << r.report.message();
  campaign_options o = fast();
  o.deadline = 300ms;
  const auto t0 = steady::now();
  campaign_result lost = e.campaign("x", "b", o);
  EXPECT_EQ(lost.report.error, make_error_code(errc::contended)) << lost.report.message();
  EXPECT_LT(steady::now() - t0, 1500ms);
  EXPECT_FALSE(lost.leadership.is_leader());
  EXPECT_EQ(e.campaign("x", "", o).report.error, make_error_code(errc::invalid_argument));
}

TEST(election, cancel_ends_a_waiting_campaign_with_cancelled) {
  redis_cluster cl(3);
  std::promise<campaign_result> p;
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  campaign_result r = e.campaign("y", "a", fast());
  ASSERT_TRUE(r) << r.report.message();
  const auto id = e.campaign_async("y", "b", fast(), [&](campaign_result x) { p.set_value(std::move(x)); });
  std::this_thread::sleep_for(150ms);
  e.cancel(id);
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().report.error, make_error_code(errc::cancelled));
}

// Five candidates campaign, lead briefly, and resign, over and over; every
// belief interval [elected, min(resign, validity end)] on one monotonic clock
// must be disjoint from every other, and terms must grow with time.
TEST(election, history_of_five_candidates_never_has_two_leaders_with_validity_left) {
  redis_cluster cl(5);
  candidates c(cl, 5);
  struct belief {
    steady::time_point from, to;
    std::uint64_t term;
    int who;
  };
  std::mutex mu;
  std::vector<belief> history;
  const auto end = steady::now() + 2500ms;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 200 && steady::now() < end; ++round) {
        campaign_options o = fast(1000ms);
        o.deadline = 600ms;
        campaign_result r = c.elections[i]->campaign("h", "cand-" + std::to_string(i), o);
        if (!r) continue;
        const auto from = steady::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(10 + 7 * i));
        const auto stop = steady::now();
        const auto valid = r.leadership.info().valid_until.value_or(stop);
        {
          std::lock_guard<std::mutex> g(mu);
          history.push_back({from, std::min(stop, valid), r.leadership.term(), i});
        }
        (void)r.leadership.resign();
        std::this_thread::sleep_for(60ms);  // let a waiting candidate win the next term
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_GE(history.size(), 5u);
  std::sort(history.begin(), history.end(), [](const belief& a, const belief& b) { return a.from < b.from; });
  std::set<int> leaders;
  for (std::size_t k = 0; k < history.size(); ++k) {
    leaders.insert(history[k].who);
    if (k == 0) continue;
    EXPECT_LE(history[k - 1].to, history[k].from) << "beliefs " << k - 1 << " and " << k << " overlap";
    EXPECT_GT(history[k].term, history[k - 1].term);
  }
  EXPECT_GE(leaders.size(), 2u);
}

}  // namespace
}  // namespace redlock::test
