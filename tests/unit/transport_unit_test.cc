// Unit tests of the transport's pure parts: the address walk's order, and the
// server text that may reach a report.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/resolve.h"
#include "node/connection.h"
#include "protocol/reply.h"

namespace redlock::detail {
namespace {

// A hand-built getaddrinfo list (no resolver involved).
class addr_list {
 public:
  addr_list& v4(const char* ip, int port) {
    auto* a = new sockaddr_in{};
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, ip, &a->sin_addr);
    return push(AF_INET, reinterpret_cast<sockaddr*>(a), sizeof *a);
  }
  addr_list& v6(const char* ip, int port) {
    auto* a = new sockaddr_in6{};
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    return push(AF_INET6, reinterpret_cast<sockaddr*>(a), sizeof *a);
  }
  addr_list& unix_entry() {
    auto* a = new sockaddr_in{};  // family AF_UNIX: never tried
    return push(AF_UNIX, reinterpret_cast<sockaddr*>(a), sizeof *a);
  }
  const addrinfo* head() const { return nodes_.empty() ? nullptr : nodes_.front(); }
  ~addr_list() {
    for (addrinfo* n : nodes_) {
      if (n->ai_family == AF_INET6) {
        delete reinterpret_cast<sockaddr_in6*>(n->ai_addr);
      } else {
        delete reinterpret_cast<sockaddr_in*>(n->ai_addr);
      }
      delete n;
    }
  }

 private:
  addr_list& push(int family, sockaddr* a, std::size_t len) {
    auto* n = new addrinfo{};
    n->ai_family = family;
    n->ai_socktype = SOCK_STREAM;
    n->ai_addr = a;
    n->ai_addrlen = static_cast<socklen_t>(len);
    if (!nodes_.empty()) nodes_.back()->ai_next = n;
    nodes_.push_back(n);
    return *this;
  }
  std::vector<addrinfo*> nodes_;
};

std::vector<std::string> texts(const std::vector<sockaddr_storage>& v) {
  std::vector<std::string> out;
  for (const auto& a : v) out.push_back(address_text(a));
  return out;
}

TEST(ConnectOrder, keeps_every_address_in_resolver_order) {
  addr_list l;
  l.v6("::1", 6379).v4("127.0.0.1", 6379).v4("10.0.0.7", 6379);
  EXPECT_EQ(texts(connect_order(l.head())),
            (std::vector<std::string>{"[::1]:6379", "127.0.0.1:6379", "10.0.0.7:6379"}));
}

TEST(ConnectOrder, drops_duplicates_and_families_it_cannot_connect_to) {
  addr_list l;
  l.v4("127.0.0.1", 7000).unix_entry().v6("::1", 7000).v4("127.0.0.1", 7000).v6("::1", 7000);
  EXPECT_EQ(texts(connect_order(l.head())), (std::vector<std::string>{"127.0.0.1:7000", "[::1]:7000"}));
}

TEST(ConnectOrder, an_empty_list_gives_nothing_to_try) {
  EXPECT_TRUE(connect_order(nullptr).empty());
}

TEST(ClockJumpAllowance, is_the_threshold_plus_the_drift_over_the_gap_capped_at_twice_the_threshold) {
  using std::chrono::milliseconds;
  // 10 s between samples at 1 %: 100 ms of drift on top of the 1 s threshold.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.01, 10'000'000), 1'100'000.0);
  // An hour between samples: uncapped that would allow 37 s; capped, 2 s.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.01, 3'600'000'000), 2'000'000.0);
  // The cap follows the threshold.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(250), 0.01, 3'600'000'000), 500'000.0);
  // No drift allowance, or samples out of order: the threshold alone.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.0, 3'600'000'000), 1'000'000.0);
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.01, -5'000'000), 1'000'000.0);
}

TEST(ClockJumpAllowance, adds_the_dating_uncertainty_of_both_samples_uncapped) {
  using std::chrono::milliseconds;
  // A sample whose reply took 3 s (a paused node) is dated 1.5 s off at most: with
  // 1 ms of the previous sample's half round trip, 1.501 s more on top of 1.1 s.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.01, 10'000'000, 1'501'000), 2'601'000.0);
  // Not capped by the threshold (it is a bound on the dating error, not a margin).
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.01, 3'600'000'000, 5'000'000), 7'000'000.0);
  // A negative uncertainty (never passed) counts as none.
  EXPECT_DOUBLE_EQ(clock_jump_allowance_us(milliseconds(1000), 0.0, 0, -7), 1'000'000.0);
}

TEST(PrintableLine, replaces_everything_but_printable_ascii_and_keeps_the_first_line) {
  EXPECT_EQ(printable_line("ERR \x1b[31mred\x07 \x7f\xc3\xa9 end\r\nsecond line"), "ERR ?[31mred? ??? end");
  EXPECT_EQ(printable_line(std::string("NUL\0byte", 8)), "NUL?byte");
  EXPECT_EQ(printable_line(std::string(500, 'x')).size(), 200u);
  EXPECT_EQ(printable_line("plain text, kept as is"), "plain text, kept as is");
}

TEST(PrintableLine, error_replies_are_classified_with_printable_details) {
  const classified c = classify_error("ERR \x1b]0;title\x07 bad\tthing");
  EXPECT_EQ(c.detail, "ERR ?]0;title? bad?thing");
}

}  // namespace
}  // namespace redlock::detail
