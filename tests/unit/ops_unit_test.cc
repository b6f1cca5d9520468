// The eviction-policy helpers of lib/connection.h: reading INFO fields, what a
// policy may evict, and the warning's text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/info.h"
#include "ops/support.h"

namespace redlock::detail {
namespace {

const char kInfo[] =
    "# Memory\r\nused_memory:916336\r\nmaxmemory:3145728\r\nmaxmemory_human:3.00M\r\n"
    "maxmemory_policy:volatile-ttl\r\nmem_allocator:jemalloc-5.3.0\r\n";

TEST(InfoField, reads_a_whole_field_name_at_a_line_start) {
  EXPECT_EQ(info_field(kInfo, "maxmemory"), "3145728");  // not maxmemory_human nor used_memory
  EXPECT_EQ(info_field(kInfo, "maxmemory_policy"), "volatile-ttl");
  EXPECT_EQ(info_field(kInfo, "memory"), "");  // only inside other names
  EXPECT_EQ(info_field(kInfo, "mem_allocator"), "jemalloc-5.3.0");
  EXPECT_EQ(info_field(kInfo, "absent"), "");
  EXPECT_EQ(info_field("# Memory\nmaxmemory_policy:noeviction", "maxmemory_policy"), "noeviction");
  EXPECT_EQ(info_field("", "maxmemory"), "");
}

// Issue 23's failover guard names a master's replicas by address.
TEST(InfoReplicas, names_each_listed_replica_by_ip_and_port_sorted_and_a_missing_line_by_its_index) {
  const char info[] =
      "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n"
      "slave0:ip=127.0.0.1,port=7005,state=online,offset=5,lag=0\r\n"
      "slave1:ip=127.0.0.2,port=7004,state=wait_bgsave,offset=0,lag=0\r\n"
      "slave2:state=online,port=7009\r\nmaster_repl_offset:5\r\n";
  EXPECT_EQ(info_replicas(info, 3), (std::vector<std::string>{"#2", "127.0.0.1:7005", "127.0.0.2:7004"}));
  EXPECT_EQ(info_replicas(info, 1), (std::vector<std::string>{"127.0.0.1:7005"}));
  EXPECT_EQ(info_replicas(info, 4).size(), 4u) << "a count beyond the listed lines is still a count";
  EXPECT_EQ(info_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", 0).size(), 0u);
  // "ip" is matched as a whole attribute name, not inside another.
  EXPECT_EQ(info_replicas("# Replication\r\nslave0:xip=1.2.3.4,port=1,ip=10.0.0.1\r\n", 1),
            (std::vector<std::string>{"10.0.0.1:1"}));
  EXPECT_EQ(info_replicas("# Replication\r\nslave0:xip=1.2.3.4,port=1\r\n", 1), (std::vector<std::string>{"#0"}));
}

TEST(EvictionRisk, noeviction_and_unknown_are_safe_volatile_evicts_locks_allkeys_everything) {
  EXPECT_EQ(eviction_risk_of("noeviction"), eviction_risk::none);
  EXPECT_EQ(eviction_risk_of(""), eviction_risk::none);  // INFO not permitted
  for (const char* p : {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    EXPECT_EQ(eviction_risk_of(p), eviction_risk::keys_with_ttl) << p;
  }
  for (const char* p : {"allkeys-lru", "allkeys-lfu", "allkeys-random", "some-future-policy"}) {
    EXPECT_EQ(eviction_risk_of(p), eviction_risk::any_key) << p;
  }
}

TEST(EvictionWarning, names_the_node_the_policy_what_it_evicts_and_the_fix) {
  const std::string v = eviction_warning_text("redis://u:***@h:1", "volatile-ttl", "3145728");
  EXPECT_EQ(v,
            "redis://u:***@h:1: maxmemory-policy volatile-ttl may evict keys that have a TTL when memory runs out: "
            "held locks (every lock key has one), so a second client can acquire a lock still held; fence "
            "counters (no TTL) are not evicted; maxmemory 3145728 bytes. Lock nodes need maxmemory-policy "
            "noeviction");
  const std::string a = eviction_warning_text("redis://h:1", "allkeys-lru", "0");
  EXPECT_NE(a.find("may evict any key"), std::string::npos) << a;
  EXPECT_NE(a.find("fencing tokens can go backwards"), std::string::npos) << a;
  EXPECT_NE(a.find("maxmemory is 0 now (no limit)"), std::string::npos) << a;
  // A hostile server's policy text stays one printable line.
  const std::string h = eviction_warning_text("redis://h:1", "allkeys-\r\nx\x01", "");
  EXPECT_EQ(h.find_first_of("\r\n\x01"), std::string::npos) << h;
}

// A set script carries every key of the command, then the token and the TTL.
TEST(SetCommand, encodes_every_key_then_the_arguments) {
  command c;
  c.script = script_id::acquire_many;
  c.keys = {"a", "bb"};
  c.arg1 = "tok";
  c.arg2 = "100";
  const wire w(c);
  const std::string sha = get_script(script_id::acquire_many).sha();
  EXPECT_EQ(w.sha_form(), "*7\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + "\r\n$1\r\n2\r\n$1\r\na\r\n$2\r\nbb\r\n" +
                              "$3\r\ntok\r\n$3\r\n100\r\n");
  EXPECT_NE(w.eval_form().find(kAcquireMany), std::string::npos);
  command r;
  r.script = script_id::release_many;
  r.keys = {"a"};
  r.arg1 = "tok";
  EXPECT_EQ(wire(r).sha_form(), "*5\r\n$7\r\nEVALSHA\r\n$40\r\n" + get_script(script_id::release_many).sha() +
                                    "\r\n$1\r\n1\r\n$1\r\na\r\n$3\r\ntok\r\n");
}

TEST(ResourceSet, refuses_empty_sets_empty_names_duplicates_and_too_many) {
  EXPECT_EQ(check_resource_set({"a"}), "");
  EXPECT_EQ(check_resource_set({"b", "a", "c"}), "");
  EXPECT_EQ(check_resource_set({}), "the set of resources must not be empty");
  EXPECT_EQ(check_resource_set({"a", ""}), "resource name must not be empty");
  EXPECT_EQ(check_resource_set({"a", "b", "a"}), "resource 'a' is given twice in the set");
  std::vector<std::string> many;
  for (std::size_t i = 0; i < kMaxSetSize; ++i) many.push_back("r" + std::to_string(i));
  EXPECT_EQ(check_resource_set(many), "");
  many.push_back("one-more");
  EXPECT_EQ(check_resource_set(many), "a set holds at most 64 resources (65 given)");
}

}  // namespace
}  // namespace redlock::detail
