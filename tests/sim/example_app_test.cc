// docs/testing.md's example: an application's own unit test, written against
// redlock/testing.h. No Redis runs; the clients are real redlock clients over
// simulated nodes in virtual time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/testing.h"

using namespace std::chrono_literals;

namespace {

// --- the application under test --------------------------------------------
// An exporter that must be the only writer of a report: it holds "report:daily"
// while it writes, one batch per tick(), and must stop writing the moment it no
// longer owns the lock.
class exporter {
 public:
  exporter(redlock::client& c, std::vector<std::string>& out) : client_(c), out_(out) {}

  bool start() {
    redlock::acquire_options o;
    o.ttl = 3s;
    o.auto_extend = true;  // the watchdog keeps it while the exporter runs
    o.on_lost = [this](const redlock::lease&, const redlock::report&) { lost_ = true; };
    auto r = client_.acquire("report:daily", o);
    if (!r) return false;
    lock_ = std::move(r.lock);
    return true;
  }

  void tick() {
    if (stopped_) return;
    if (lost_ || !lock_.owns_lock()) {  // never write without the lock
      stopped_ = true;
      return;
    }
    out_.push_back("batch " + std::to_string(out_.size()));
  }

  bool stopped() const { return stopped_; }

 private:
  redlock::client& client_;
  std::vector<std::string>& out_;
  redlock::lock lock_;
  bool lost_ = false;
  bool stopped_ = false;
};

// --- its tests ----------------------------------------------------------------

TEST(ExampleApp, keeps_writing_while_it_holds_the_lock_and_stops_when_the_lock_is_lost) {
  redlock::testing::world w;  // three simulated nodes
  auto c = w.make_client();
  std::vector<std::string> written;
  exporter e(*c, written);
  ASSERT_TRUE(e.start());

  for (int i = 0; i < 10; ++i) {  // 10 s: longer than the TTL; the watchdog extends
    w.advance(1s);
    e.tick();
  }
  EXPECT_EQ(written.size(), 10u);

  w.delete_key_everywhere("report:daily");  // an operator's DEL, an eviction...
  w.advance(2s);                             // ...the watchdog's next extension finds out
  e.tick();
  EXPECT_TRUE(e.stopped());
  EXPECT_EQ(written.size(), 10u);
}

TEST(ExampleApp, stops_when_a_majority_of_nodes_is_unreachable_for_longer_than_the_ttl) {
  redlock::testing::world w;
  auto c = w.make_client();
  std::vector<std::string> written;
  exporter e(*c, written);
  ASSERT_TRUE(e.start());
  w.advance(1s);
  e.tick();
  w.pause_node(0);  // two of three nodes frozen: no extension can succeed
  w.pause_node(1);
  for (int i = 0; i < 5 && !e.stopped(); ++i) {
    w.advance(1s);
    e.tick();
  }
  EXPECT_TRUE(e.stopped());
  EXPECT_LE(written.size(), 4u);  // never past the lock's last validity (3 s TTL)
}

TEST(ExampleApp, a_second_instance_does_not_start_while_the_first_holds_the_lock) {
  redlock::testing::world w;
  auto a = w.make_client();
  auto b = w.make_client();
  std::vector<std::string> written;
  exporter first(*a, written);
  exporter second(*b, written);
  ASSERT_TRUE(first.start());
  EXPECT_FALSE(second.start());  // contended (after its retries, in virtual time)
}

}  // namespace
