// The handshake of a connection (lib/node/handshake.h) without a connection: the
// requests it pipelines for each plan, and its verdict on each reply (replies
// parsed by hiredis from RESP text, as the connection's reader does).
#include "parse_resp.h"
#include "node/handshake.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

namespace redlock::detail {
namespace {

using test::parse_resp;
using test::parsed_reply;

using next = handshake::answer::next;
using content = handshake::answer::content;

// The answer's text points into the reply: the last one stays alive until the next.
handshake::answer take(handshake& h, std::string_view resp) {
  static parsed_reply last;
  last = parse_resp(resp);
  if (!last) return {};
  return h.take(*last);
}

handshake::plan guarded() {
  handshake::plan p;
  p.restart_guard = true;
  p.clock_guard = true;
  return p;
}

TEST(Handshake, pipelines_auth_select_ping_and_the_guards_requests_in_order) {
  handshake h;
  handshake::plan p = guarded();
  p.auth = true;
  p.username = "app";
  p.password = "secret";
  p.db = 2;
  std::string out;
  h.begin(p, out);
  EXPECT_EQ(out,
            "*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$6\r\nsecret\r\n"
            "*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"
            "*1\r\n$4\r\nPING\r\n"
            "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"
            "*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n"
            "*1\r\n$4\r\nTIME\r\n");
  EXPECT_TRUE(h.asks_time());

  EXPECT_EQ(take(h, "+OK\r\n").verdict, next::more);
  EXPECT_EQ(take(h, "+OK\r\n").verdict, next::more);
  const auto pong = take(h, "+PONG\r\n");
  EXPECT_EQ(pong.verdict, next::more);
  EXPECT_EQ(pong.carries, content::nothing);
  const auto server = take(h, "$30\r\n# Server\r\nrun_id:abc\r\nuptime:1\r\n");
  EXPECT_EQ(server.verdict, next::more);
  EXPECT_EQ(server.carries, content::server_info);
  EXPECT_EQ(server.text, "# Server\r\nrun_id:abc\r\nuptime:1");
  const auto memory = take(h, "$8\r\n# Memory\r\n");
  EXPECT_EQ(memory.verdict, next::more);
  EXPECT_EQ(memory.carries, content::memory_info);
  EXPECT_EQ(memory.text, "# Memory");
  const auto time = take(h, "*2\r\n$10\r\n1700000000\r\n$6\r\n250000\r\n");
  EXPECT_EQ(time.verdict, next::ready);
  EXPECT_EQ(time.carries, content::server_time);
  ASSERT_TRUE(time.server_us);
  EXPECT_EQ(*time.server_us, 1'700'000'000'250'000);
}

TEST(Handshake, without_credentials_db_or_guards_it_is_a_ping) {
  handshake h;
  std::string out;
  h.begin(handshake::plan{}, out);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n");
  EXPECT_FALSE(h.asks_time());
  EXPECT_EQ(take(h, "+PONG\r\n").verdict, next::ready);
}

TEST(Handshake, a_subscriber_connection_asks_nothing_for_the_guards) {
  handshake h;
  handshake::plan p = guarded();
  p.voting = false;
  std::string out;
  h.begin(p, out);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n");
  EXPECT_FALSE(h.asks_time());
}

TEST(Handshake, the_clock_guard_alone_still_reads_the_eviction_policy) {
  handshake h;
  handshake::plan p;
  p.clock_guard = true;
  std::string out;
  h.begin(p, out);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n*1\r\n$4\r\nTIME\r\n");
}

TEST(Handshake, a_refused_password_fails_permanently_with_the_servers_word) {
  handshake h;
  handshake::plan p;
  p.auth = true;
  p.password = "wrong";
  std::string out;
  h.begin(p, out);
  const auto a = take(h, "-WRONGPASS invalid username-password pair\r\n");
  EXPECT_EQ(a.verdict, next::fail);
  EXPECT_EQ(a.status, node_status::auth_error);
  EXPECT_TRUE(a.permanent);
  EXPECT_EQ(a.detail, "WRONGPASS invalid username-password pair");
}

TEST(Handshake, an_acl_refusal_is_permanent_and_other_refusals_are_not) {
  handshake h;
  handshake::plan p;
  p.db = 3;
  std::string out;
  h.begin(p, out);
  const auto noperm = take(h, "-NOPERM this user has no permissions to run the 'select' command\r\n");
  EXPECT_EQ(noperm.verdict, next::fail);
  EXPECT_EQ(noperm.status, node_status::server_error);
  EXPECT_TRUE(noperm.permanent);

  out.clear();
  h.begin(p, out);
  const auto other = take(h, "-ERR DB index is out of range\r\n");
  EXPECT_EQ(other.verdict, next::fail);
  EXPECT_EQ(other.status, node_status::server_error);
  EXPECT_FALSE(other.permanent);
  EXPECT_EQ(other.detail, "handshake refused: ERR DB index is out of range");
}

TEST(Handshake, something_that_does_not_answer_pong_is_not_a_redis_server) {
  handshake h;
  std::string out;
  h.begin(handshake::plan{}, out);
  const auto a = take(h, "+HELLO\r\n");
  EXPECT_EQ(a.verdict, next::fail);
  EXPECT_EQ(a.status, node_status::protocol_error);
  EXPECT_FALSE(a.permanent);
}

TEST(Handshake, info_or_time_refused_leaves_the_guards_blind_but_the_node_usable) {
  handshake h;
  std::string out;
  h.begin(guarded(), out);
  EXPECT_EQ(take(h, "+PONG\r\n").verdict, next::more);
  const auto info = take(h, "-NOPERM this user has no permissions to run the 'info' command\r\n");
  EXPECT_EQ(info.verdict, next::more);
  EXPECT_EQ(info.carries, content::nothing);
  EXPECT_EQ(take(h, "-NOPERM no info\r\n").carries, content::nothing);
  const auto time = take(h, "-NOPERM no time\r\n");
  EXPECT_EQ(time.verdict, next::ready);
  EXPECT_EQ(time.carries, content::nothing);
  EXPECT_FALSE(time.server_us);
}

// Issue 23: a node whose writes need their replicas counts them in its handshake.
std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

TEST(Handshake, confirming_replication_asks_info_replication_last_and_counts_the_replicas) {
  handshake h;
  handshake::plan p;
  p.confirm_replication = true;
  std::string out;
  h.begin(p, out);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n");
  EXPECT_EQ(take(h, "+PONG\r\n").verdict, next::more);
  const handshake::answer a =
      take(h, bulk("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
                   "slave0:ip=127.0.0.1,port=7001,state=online,offset=5,lag=0\r\n"));
  EXPECT_EQ(a.verdict, next::ready);
  EXPECT_EQ(a.carries, content::replicas);
  EXPECT_EQ(a.replicas, 2) << "every attached replica, also one still syncing";
  // A subscriber connection casts no vote: nothing to confirm.
  p.voting = false;
  out.clear();
  h.begin(p, out);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n");
}

TEST(Handshake, a_replica_or_an_unreadable_count_is_never_a_vote) {
  std::string problem;
  EXPECT_EQ(handshake::replicas_of("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", problem), 0);
  EXPECT_EQ(problem, "");
  handshake::replicas_of("# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n", problem);
  EXPECT_EQ(problem, "the server is a replica (of 127.0.0.1:7000), not a master: no vote");
  handshake::replicas_of("# Replication\r\nconnected_slaves:1\r\n", problem);
  EXPECT_NE(problem.find("no role"), std::string::npos) << problem;
  handshake::replicas_of("# Replication\r\nrole:master\r\nconnected_slaves:x1\r\n", problem);
  EXPECT_NE(problem.find("not a count"), std::string::npos) << problem;
  handshake::replicas_of("# Replication\r\nrole:master\r\n", problem);
  EXPECT_NE(problem.find("no connected_slaves"), std::string::npos) << problem;

  handshake h;
  handshake::plan p;
  p.confirm_replication = true;
  std::string out;
  h.begin(p, out);
  take(h, "+PONG\r\n");
  const handshake::answer refused = take(h, "-NOPERM this user has no permissions to run the 'info' command\r\n");
  EXPECT_EQ(refused.verdict, next::fail);
  EXPECT_TRUE(refused.permanent);
  EXPECT_NE(refused.detail.find("INFO replication refused"), std::string::npos) << refused.detail;
}

}  // namespace
}  // namespace redlock::detail
