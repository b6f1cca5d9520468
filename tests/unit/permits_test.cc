// The semaphore's pure parts (lib/permits.h): permit resources, the random permit
// order, how permit outcomes combine into an attempt's error, the configuration check.
#include "primitives/permits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "redlock/error.h"
#include "pure/retry.h"

namespace redlock::detail {
namespace {

TEST(Permits, resource_is_name_permit_index_and_never_collides) {
  EXPECT_EQ(permit_resource("jobs", 0), "jobs:permit:0");
  EXPECT_EQ(permit_resource("jobs", 17), "jobs:permit:17");
  // Names that look like permits still give distinct resources.
  std::set<std::string> seen;
  for (const char* n : {"a", "a:permit:1", "a:permit", "a:permit:", "a:"}) {
    for (std::size_t i = 0; i < 12; ++i)
      EXPECT_TRUE(seen.insert(permit_resource(n, i)).second) << n << " " << i;
  }
}

TEST(Permits, order_is_a_permutation_and_spreads_first_choices) {
  jitter_rng rng(7);
  std::vector<int> first(8, 0);
  for (int round = 0; round < 8000; ++round) {
    auto o = permit_order(8, [&] { return rng.next(); });
    auto sorted = o;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(sorted[i], i);
    ++first[o[0]];
  }
  for (int f : first) {
    EXPECT_GT(f, 800);  // expected 1000 each
    EXPECT_LT(f, 1200);
  }
  EXPECT_EQ(permit_order(1, [] { return 5u; }), std::vector<std::size_t>{0});
}

std::error_code e(errc x) { return make_error_code(x); }

TEST(Permits, a_full_semaphore_is_contended_only_when_every_permit_was) {
  EXPECT_EQ(combine_permit_errors({e(errc::contended), e(errc::contended)}), errc::contended);
  EXPECT_EQ(combine_permit_errors({e(errc::contended), e(errc::unavailable)}), errc::unavailable);
  EXPECT_EQ(combine_permit_errors({e(errc::unavailable), e(errc::unavailable)}), errc::unavailable);
  EXPECT_EQ(combine_permit_errors({e(errc::contended), e(errc::validity_exhausted)}),
            errc::validity_exhausted);
  EXPECT_EQ(combine_permit_errors({e(errc::contended), e(errc::auth_failed)}), errc::auth_failed);
  EXPECT_EQ(combine_permit_errors({e(errc::cancelled), e(errc::contended)}), errc::cancelled);
  EXPECT_EQ(combine_permit_errors({}), errc::unavailable);
}

TEST(Permits, retryable_matches_the_retry_policy) {
  EXPECT_TRUE(retryable(e(errc::contended)));
  EXPECT_TRUE(retryable(e(errc::unavailable)));
  EXPECT_TRUE(retryable(e(errc::validity_exhausted)));
  for (errc x : {errc::invalid_argument, errc::auth_failed, errc::permission_denied, errc::wrong_type,
                 errc::tls_failed, errc::cancelled}) {
    EXPECT_FALSE(retryable(e(x)));
  }
}

TEST(Permits, configuration_check) {
  EXPECT_EQ(check_semaphore("x", 1, 1), "");
  EXPECT_EQ(check_semaphore("x", 1024, 0), "");
  EXPECT_NE(check_semaphore("", 1, 1), "");
  EXPECT_NE(check_semaphore("x", 0, 0), "");
  EXPECT_NE(check_semaphore("x", 1025, 1), "");
  EXPECT_NE(check_semaphore("x", 2, 3), "");
}

}  // namespace
}  // namespace redlock::detail
