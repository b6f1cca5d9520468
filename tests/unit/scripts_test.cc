// Unit tests of lib/scripts.h: the script table and the SHA-1 digests EVALSHA uses.
#include "protocol/scripts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "pure/sha1.h"

namespace redlock::detail {
namespace {

constexpr script_id kAllScripts[] = {script_id::acquire, script_id::acquire_fenced, script_id::fence_commit,
                                     script_id::extend,  script_id::release,        script_id::inspect,
                                     script_id::release_quiet};

// The set scripts (lib/multi.cc): any number of keys, given by the command.
constexpr script_id kSetScripts[] = {script_id::acquire_many, script_id::extend_many,
                                     script_id::release_many, script_id::release_many_quiet};

TEST(Scripts, TableCoversEveryScriptIdBesidesThePlainCommands) {
  // `ping` and `acquire_set` are plain commands; acquire_set falls back to kAcquire.
  EXPECT_EQ(std::size(kAllScripts) + std::size(kSetScripts) + 2, static_cast<std::size_t>(script_id::count));
  EXPECT_STREQ(get_script(script_id::ping).body, "");
  EXPECT_EQ(get_script(script_id::ping).num_keys, 0);
  EXPECT_STREQ(get_script(script_id::acquire_set).body, kAcquire);
  EXPECT_EQ(get_script(script_id::acquire_set).sha(), sha1_hex(kAcquire));
}

TEST(Scripts, ShaIsTheSha1OfTheBodyAs40LowercaseHex) {
  for (script_id id : kAllScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const script& s = get_script(id);
    ASSERT_NE(s.body, nullptr);
    EXPECT_EQ(s.sha(), sha1_hex(s.body));
    ASSERT_EQ(s.sha().size(), 40u);
    for (char c : s.sha()) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << s.sha();
  }
}

TEST(Scripts, ShaIsComputedOnceAndStable) {
  for (script_id id : kAllScripts) {
    const script& s = get_script(id);
    EXPECT_EQ(&s.sha(), &get_script(id).sha());
    EXPECT_EQ(&s, &get_script(id));
  }
}

TEST(Scripts, EveryScriptHasADistinctBodyAndSha) {
  std::set<std::string> bodies, shas;
  for (script_id id : kAllScripts) {
    bodies.insert(get_script(id).body);
    shas.insert(get_script(id).sha());
  }
  EXPECT_EQ(bodies.size(), std::size(kAllScripts));
  EXPECT_EQ(shas.size(), std::size(kAllScripts));
}

TEST(Scripts, EachIdMapsToItsOwnBody) {
  EXPECT_STREQ(get_script(script_id::acquire).body, kAcquire);
  EXPECT_STREQ(get_script(script_id::acquire_fenced).body, kAcquireFenced);
  EXPECT_STREQ(get_script(script_id::fence_commit).body, kFenceCommit);
  EXPECT_STREQ(get_script(script_id::extend).body, kExtend);
  EXPECT_STREQ(get_script(script_id::release).body, kRelease);
  EXPECT_STREQ(get_script(script_id::inspect).body, kInspect);
  EXPECT_STREQ(get_script(script_id::release_quiet).body, kReleaseQuiet);
}

// Waiting without polling (docs/coordination.md): the release publishes the
// released token on <key>:released, through redis.pcall (a user without channel
// permissions still releases); the rollback's delete publishes nothing.
TEST(Scripts, ReleasePublishesOnTheKeysChannelAndTheQuietOneDoesNot) {
  EXPECT_NE(std::strstr(kRelease, "redis.pcall('PUBLISH', KEYS[1] .. ':released', ARGV[1])"), nullptr);
  EXPECT_EQ(std::strstr(kRelease, "redis.call('PUBLISH'"), nullptr);
  EXPECT_EQ(std::strstr(kReleaseQuiet, "PUBLISH"), nullptr);
  // A set's release publishes on every deleted key's channel (review 13, W2).
  EXPECT_NE(std::strstr(kReleaseMany, "redis.pcall('PUBLISH', KEYS[i] .. ':released', ARGV[1])"), nullptr);
  EXPECT_EQ(std::strstr(kReleaseMany, "redis.call('PUBLISH'"), nullptr);
  EXPECT_EQ(std::strstr(kReleaseManyQuiet, "PUBLISH"), nullptr);
}

// A least-privilege ACL user without +time must be able to run every script: the
// clock-jump guard's TIME is a separate command pipelined behind the acquire.
TEST(Scripts, NoScriptCallsTime) {
  for (script_id id : kAllScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    EXPECT_EQ(std::strstr(get_script(id).body, "TIME"), nullptr) << get_script(id).body;
  }
}

TEST(Scripts, OnlyTheFencingScriptsTouchTwoKeys) {
  EXPECT_EQ(get_script(script_id::acquire_fenced).num_keys, 2);
  EXPECT_EQ(get_script(script_id::fence_commit).num_keys, 2);
  EXPECT_EQ(get_script(script_id::acquire).num_keys, 1);
  EXPECT_EQ(get_script(script_id::extend).num_keys, 1);
  EXPECT_EQ(get_script(script_id::release).num_keys, 1);
  EXPECT_EQ(get_script(script_id::release_quiet).num_keys, 1);
  EXPECT_EQ(get_script(script_id::inspect).num_keys, 1);
}

TEST(Scripts, KeyCountMatchesTheKeysTheBodyUses) {
  for (script_id id : kAllScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const script& s = get_script(id);
    EXPECT_NE(std::strstr(s.body, "KEYS[1]"), nullptr);
    EXPECT_EQ(std::strstr(s.body, "KEYS[2]") != nullptr, s.num_keys == 2);
    EXPECT_EQ(std::strstr(s.body, "KEYS[3]"), nullptr);
  }
}

TEST(Scripts, TheSetScriptsTakeEveryKeyTheCommandGivesAndCallNoTime) {
  EXPECT_STREQ(get_script(script_id::acquire_many).body, kAcquireMany);
  EXPECT_STREQ(get_script(script_id::extend_many).body, kExtendMany);
  EXPECT_STREQ(get_script(script_id::release_many).body, kReleaseMany);
  EXPECT_STREQ(get_script(script_id::release_many_quiet).body, kReleaseManyQuiet);
  std::set<std::string> shas;
  for (script_id id : kAllScripts) shas.insert(get_script(id).sha());
  for (script_id id : kSetScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const script& s = get_script(id);
    EXPECT_EQ(s.num_keys, 0);
    EXPECT_EQ(s.sha(), sha1_hex(s.body));
    EXPECT_TRUE(shas.insert(s.sha()).second);
    EXPECT_NE(std::strstr(s.body, "#KEYS"), nullptr);
    EXPECT_EQ(std::strstr(s.body, "KEYS[1]"), nullptr);
    EXPECT_EQ(std::strstr(s.body, "TIME"), nullptr);
  }
}

}  // namespace
}  // namespace redlock::detail
