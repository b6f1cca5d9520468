// client::probe's INFO parsing (lib/probe.h).
#include <gtest/gtest.h>

#include <string>

#include "ops/probe.h"

namespace redlock::detail {
namespace {

TEST(ProbeInfo, reads_identity_persistence_and_policy_from_the_three_sections) {
  node_health h;
  apply_info("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nrun_id:abc123\r\n"
             "uptime_in_seconds:3725\r\nuptime_in_days:0\r\n",
             h);
  apply_info("# Persistence\r\nloading:0\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n", h);
  apply_info("# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n", h);
  EXPECT_EQ(h.redis_version, "7.0.15");
  EXPECT_EQ(h.run_id, "abc123");
  EXPECT_EQ(h.uptime_s, 3725);
  EXPECT_EQ(h.aof_enabled, true);
  EXPECT_EQ(h.maxmemory_policy, "allkeys-lru");
}

TEST(ProbeInfo, absent_or_malformed_fields_stay_unknown) {
  node_health h;
  apply_info("# Server\r\nrun_id:\r\nuptime_in_seconds:12x\r\n", h);
  apply_info("# Persistence\r\naof_enabled:yes\r\n", h);
  apply_info("", h);
  EXPECT_EQ(h.run_id, "");
  EXPECT_FALSE(h.uptime_s);
  EXPECT_FALSE(h.aof_enabled);
  EXPECT_EQ(h.maxmemory_policy, "");
  apply_info("# Persistence\nrdb_changes_since_last_save:0\naof_enabled:0\n", h);
  EXPECT_EQ(h.aof_enabled, false);
}

}  // namespace
}  // namespace redlock::detail
