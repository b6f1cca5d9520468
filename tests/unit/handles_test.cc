// The registry of live lock handles (lib/ops/held.h, handle_registry): a handle is
// found by its lease (token and resource) while tracked, live or not, and only
// while live by handle_for; tokens of 32 lowercase hex digits and any others alike.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ops/held.h"

namespace redlock::detail {
namespace {

std::shared_ptr<held> handle(const std::string& resource, const std::string& token) {
  auto h = std::make_shared<held>();
  h->resource = resource;
  h->token = token;
  return h;
}

lease lease_of(const std::string& resource, const std::string& token) {
  lease l;
  l.resource = resource;
  l.token = token;
  return l;
}

const std::string kHex = "0123456789abcdef0123456789abcdef";

TEST(HandleRegistry, finds_a_tracked_handle_by_token_and_resource) {
  for (const std::string& token :
       {kHex, std::string("not-a-hex-token"), std::string("0123456789ABCDEF0123456789ABCDEF")}) {
    handle_registry reg;
    auto h = handle("res", token);
    reg.track(h);
    EXPECT_EQ(reg.handle_for(lease_of("res", token)), h) << token;
    EXPECT_EQ(reg.tracked_for(lease_of("res", token)), h) << token;
    EXPECT_EQ(reg.handle_for(lease_of("other", token)), nullptr) << token;  // same token, another resource
    EXPECT_EQ(reg.handle_for(lease_of("res", token + "0")), nullptr) << token;
    reg.untrack(*h);
    EXPECT_EQ(reg.tracked_for(lease_of("res", token)), nullptr) << token;
  }
}

TEST(HandleRegistry, a_lost_or_finished_handle_is_tracked_but_not_live) {
  handle_registry reg;
  auto lost = handle("a", kHex);
  auto done = handle("b", "b-token");
  reg.track(lost);
  reg.track(done);
  lost->lost.store(true);
  done->finished.store(true);
  EXPECT_EQ(reg.handle_for(lease_of("a", kHex)), nullptr);
  EXPECT_EQ(reg.tracked_for(lease_of("a", kHex)), lost);
  EXPECT_EQ(reg.handle_for(lease_of("b", "b-token")), nullptr);
  EXPECT_EQ(reg.tracked_for(lease_of("b", "b-token")), done);
}

TEST(HandleRegistry, a_destroyed_handle_is_not_found_and_untrack_spares_its_successor) {
  handle_registry reg;
  {
    auto gone = handle("a", kHex);
    reg.track(gone);
  }
  EXPECT_EQ(reg.tracked_for(lease_of("a", kHex)), nullptr);
  // Untracking an older handle of the same token leaves the one tracked now.
  auto old_one = handle("a", kHex);
  auto new_one = handle("a", kHex);
  reg.track(old_one);
  reg.track(new_one);
  reg.untrack(*old_one);
  EXPECT_EQ(reg.tracked_for(lease_of("a", kHex)), new_one);
}

}  // namespace
}  // namespace redlock::detail
