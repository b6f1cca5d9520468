// Unit tests of lib/reply.h: turning one node's reply into a vote. Replies are
// hand-built redisReply trees (calloc'd, freed by reply_deleter below), plus a few
// parsed from RESP bytes by hiredis' own reader to pin the real wire shapes.
#include "parse_resp.h"
#include "protocol/reply.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlock/error.h"
#include "redlock/report.h"

namespace redlock::detail {
namespace {

// --- hand-built replies ---

void free_reply(redisReply* r) noexcept {
  if (r == nullptr) return;
  for (std::size_t i = 0; i < r->elements; ++i) free_reply(r->element[i]);
  std::free(r->element);
  std::free(r->str);
  std::free(r);
}

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { free_reply(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

reply_ptr make_reply(int type) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (r == nullptr) std::abort();
  r->type = type;
  return reply_ptr(r);
}

reply_ptr make_int(long long v) {
  reply_ptr r = make_reply(REDIS_REPLY_INTEGER);
  r->integer = v;
  return r;
}

reply_ptr make_text(int type, std::string_view s) {
  reply_ptr r = make_reply(type);
  r->str = static_cast<char*>(std::malloc(s.size() + 1));
  if (r->str == nullptr) std::abort();
  if (!s.empty()) std::memcpy(r->str, s.data(), s.size());
  r->str[s.size()] = '\0';
  r->len = s.size();
  return r;
}

reply_ptr make_str(std::string_view s) { return make_text(REDIS_REPLY_STRING, s); }
reply_ptr make_status(std::string_view s) { return make_text(REDIS_REPLY_STATUS, s); }
reply_ptr make_err(std::string_view s) { return make_text(REDIS_REPLY_ERROR, s); }
reply_ptr make_nil() { return make_reply(REDIS_REPLY_NIL); }

reply_ptr make_array(std::vector<reply_ptr> items) {
  reply_ptr r = make_reply(REDIS_REPLY_ARRAY);
  if (!items.empty()) {
    r->element = static_cast<redisReply**>(std::calloc(items.size(), sizeof(redisReply*)));
    if (r->element == nullptr) std::abort();
  }
  r->elements = items.size();
  for (std::size_t i = 0; i < items.size(); ++i) r->element[i] = items[i].release();
  return r;
}

template <typename... Items>
reply_ptr array_of(Items... items) {
  std::vector<reply_ptr> v;
  (v.push_back(std::move(items)), ...);
  return make_array(std::move(v));
}

// --- replies parsed by hiredis from RESP bytes ---

using test::parse_resp;
using test::parsed_reply;

// Scripts whose answer is 1 = ok / 0 = not owner.
constexpr script_id kOwnershipScripts[] = {script_id::extend, script_id::release, script_id::fence_commit,
                                           script_id::release_quiet};
constexpr script_id kAllScripts[] = {script_id::acquire, script_id::acquire_fenced, script_id::fence_commit,
                                     script_id::extend,  script_id::release,        script_id::inspect};

void expect_protocol_error(script_id id, const redisReply* r) {
  const classified c = classify_reply(id, r);
  EXPECT_EQ(c.v.status, node_status::protocol_error);
  EXPECT_EQ(c.v.permanent, errc{});
  EXPECT_FALSE(c.detail.empty());
  EXPECT_FALSE(c.fence.has_value());
  EXPECT_FALSE(c.value.has_value());
}

// --- acquire and acquire_fenced ---
// Both scripts answer {1 granted | 0 held, fence counter}; the counter is "0" for
// the unfenced script. (They call no TIME: the connection pipelines it.)

constexpr script_id kAcquireScripts[] = {script_id::acquire, script_id::acquire_fenced};

reply_ptr acquire_reply(reply_ptr flag, reply_ptr counter) { return array_of(std::move(flag), std::move(counter)); }

TEST(ClassifyAcquire, OneIsGranted) {
  const classified c = classify_reply(script_id::acquire, acquire_reply(make_int(1), make_str("0")).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  EXPECT_EQ(c.v.permanent, errc{});
  EXPECT_EQ(c.detail, "");
  EXPECT_FALSE(c.fence.has_value());  // unfenced acquire reports no fence
}

TEST(ClassifyAcquire, ZeroIsHeldByAnotherOwner) {
  for (script_id id : kAcquireScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const classified c = classify_reply(id, acquire_reply(make_int(0), make_str("0")).get());
    EXPECT_EQ(c.v.status, node_status::held);
    EXPECT_EQ(c.v.permanent, errc{});
    EXPECT_EQ(c.detail, "");
    EXPECT_FALSE(c.fence.has_value());
  }
}

TEST(ClassifyAcquire, AnythingButATwoElementArrayIsAProtocolError) {
  for (script_id id : kAcquireScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    expect_protocol_error(id, make_int(1).get());
    expect_protocol_error(id, make_int(0).get());
    expect_protocol_error(id, make_str("1").get());
    expect_protocol_error(id, make_status("OK").get());
    expect_protocol_error(id, make_nil().get());
    expect_protocol_error(id, make_array({}).get());
    expect_protocol_error(id, array_of(make_int(1)).get());
    expect_protocol_error(id, array_of(make_int(1), make_str("41"), make_str("1700000000")).get());
    // The shape of the scripts that called TIME themselves (until Dec 2026).
    expect_protocol_error(
        id, array_of(make_int(1), make_str("41"), make_str("1700000000"), make_str("123456")).get());
  }
}

TEST(ClassifyAcquire, FlagOtherThanZeroOrOneIsAProtocolError) {
  for (script_id id : kAcquireScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    expect_protocol_error(id, acquire_reply(make_int(2), make_str("0")).get());
    expect_protocol_error(id, acquire_reply(make_int(-1), make_str("0")).get());
    expect_protocol_error(id, acquire_reply(make_str("1"), make_str("0")).get());
    expect_protocol_error(id, acquire_reply(make_nil(), make_str("0")).get());
  }
}

// --- acquire_many: {1, '0'} granted, {0, i} held at the i-th key (1-based) ---

TEST(ClassifyAcquireMany, GrantedAndHeldNamingTheKeyIndex) {
  const classified ok =
      classify_reply(script_id::acquire_many, acquire_reply(make_int(1), make_str("0")).get());
  EXPECT_EQ(ok.v.status, node_status::ok);
  EXPECT_FALSE(ok.blocked_by.has_value());
  const classified held =
      classify_reply(script_id::acquire_many, acquire_reply(make_int(0), make_int(3)).get());
  EXPECT_EQ(held.v.status, node_status::held);
  EXPECT_EQ(held.blocked_by, std::optional<std::size_t>(3));
  const classified wrong =
      classify_reply(script_id::acquire_many, make_err("WRONGTYPE lock key holds a non-string value").get());
  EXPECT_EQ(wrong.v.permanent, errc::wrong_type);
}

TEST(ClassifyAcquireMany, OtherShapesAreProtocolErrors) {
  const script_id id = script_id::acquire_many;
  expect_protocol_error(id, make_int(1).get());
  expect_protocol_error(id, make_nil().get());
  expect_protocol_error(id, array_of(make_int(1)).get());
  expect_protocol_error(id, acquire_reply(make_int(0), make_str("2")).get());  // the index is an integer
  expect_protocol_error(id, acquire_reply(make_int(0), make_int(0)).get());    // 1-based
  expect_protocol_error(id, acquire_reply(make_int(2), make_str("0")).get());
}

TEST(ClassifyExtendReleaseMany, OneOkZeroNotOwner) {
  for (script_id id : {script_id::extend_many, script_id::release_many}) {
    EXPECT_EQ(classify_reply(id, make_int(1).get()).v.status, node_status::ok);
    EXPECT_EQ(classify_reply(id, make_int(0).get()).v.status, node_status::not_owner);
    expect_protocol_error(id, make_int(2).get());
  }
}

// The plain TIME reply the connection pipelines behind each acquire (the SET, or
// the acquire script) for the clock-jump guard.
TEST(ParseTimeReply, AcceptsTwoDecimalStringsAndRejectsAnythingElse) {
  EXPECT_EQ(parse_time_reply(array_of(make_str("1700000000"), make_str("123456")).get()),
            std::optional<std::int64_t>(1700000000123456));
  EXPECT_EQ(parse_time_reply(array_of(make_str("1099511627776"), make_str("999999")).get()),
            std::optional<std::int64_t>(1099511627776999999));
  EXPECT_FALSE(parse_time_reply(array_of(make_str("1099511627777"), make_str("0")).get()));  // > 2^40 s
  EXPECT_FALSE(parse_time_reply(array_of(make_str("1700000000"), make_str("1000000")).get()));
  EXPECT_FALSE(parse_time_reply(array_of(make_str("-5"), make_str("0")).get()));
  EXPECT_FALSE(parse_time_reply(array_of(make_str("99999999999999999999999"), make_str("0")).get()));
  // Integer fields are read too; negative ones are not.
  EXPECT_EQ(parse_time_reply(array_of(make_int(1700000000), make_int(5)).get()),
            std::optional<std::int64_t>(1700000000000005));
  EXPECT_FALSE(parse_time_reply(array_of(make_int(-1), make_str("0")).get()));
  EXPECT_FALSE(parse_time_reply(array_of(make_str("1700000000")).get()));
  EXPECT_FALSE(parse_time_reply(make_str("1700000000").get()));
  EXPECT_FALSE(parse_time_reply(make_err("NOPERM this user has no permissions to run the 'time' command").get()));
}

TEST(ClassifyAcquireFenced, GrantedWithStringCounterCarriesTheFence) {
  const classified c =
      classify_reply(script_id::acquire_fenced, acquire_reply(make_int(1), make_str("41")).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.fence.has_value());
  EXPECT_EQ(*c.fence, 41u);
}

TEST(ClassifyAcquireFenced, GrantedWithIntegerCounterCarriesTheFence) {
  const classified c =
      classify_reply(script_id::acquire_fenced, acquire_reply(make_int(1), make_int(7)).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.fence.has_value());
  EXPECT_EQ(*c.fence, 7u);
}

TEST(ClassifyAcquireFenced, FreshCounterIsZero) {
  const classified c =
      classify_reply(script_id::acquire_fenced, acquire_reply(make_int(1), make_str("0")).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.fence.has_value());
  EXPECT_EQ(*c.fence, 0u);
}

TEST(ClassifyAcquireFenced, CounterUpToUint64MaxIsAccepted) {
  const classified c = classify_reply(script_id::acquire_fenced,
                                      acquire_reply(make_int(1), make_str("18446744073709551615")).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.fence.has_value());
  EXPECT_EQ(*c.fence, UINT64_MAX);

  const classified padded = classify_reply(
      script_id::acquire_fenced, acquire_reply(make_int(1), make_str("00000000000000000042")).get());
  ASSERT_TRUE(padded.fence.has_value());
  EXPECT_EQ(*padded.fence, 42u);
}

TEST(ClassifyAcquireFenced, CounterThatIsNotANonNegativeIntegerIsAProtocolError) {
  const script_id id = script_id::acquire_fenced;
  const auto granted = [](reply_ptr counter) { return acquire_reply(make_int(1), std::move(counter)); };
  expect_protocol_error(id, granted(make_str("-3")).get());
  expect_protocol_error(id, granted(make_str("abc")).get());
  expect_protocol_error(id, granted(make_str("99999999999999999999999")).get());
  expect_protocol_error(id, granted(make_str("18446744073709551616")).get());
  expect_protocol_error(id, granted(make_str("99999999999999999999")).get());
  expect_protocol_error(id, granted(make_str("")).get());
  expect_protocol_error(id, granted(make_str(" 41")).get());
  expect_protocol_error(id, granted(make_str("41 ")).get());
  expect_protocol_error(id, granted(make_str("4.1")).get());
  expect_protocol_error(id, granted(make_str("+41")).get());
  expect_protocol_error(id, granted(make_int(-1)).get());
  expect_protocol_error(id, granted(make_nil()).get());
  expect_protocol_error(id, granted(make_status("41")).get());
  expect_protocol_error(id, granted(array_of(make_int(41))).get());
}

// --- extend / release / fence_commit ---

TEST(ClassifyOwnershipScripts, OneIsOkAndZeroIsNotOwner) {
  for (script_id id : kOwnershipScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const classified yes = classify_reply(id, make_int(1).get());
    EXPECT_EQ(yes.v.status, node_status::ok);
    EXPECT_EQ(yes.v.permanent, errc{});
    const classified no = classify_reply(id, make_int(0).get());
    EXPECT_EQ(no.v.status, node_status::not_owner);
    EXPECT_EQ(no.v.permanent, errc{});
  }
}

TEST(ClassifyOwnershipScripts, AnyOtherReplyIsAProtocolError) {
  for (script_id id : kOwnershipScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    expect_protocol_error(id, make_int(2).get());
    expect_protocol_error(id, make_int(-2).get());
    expect_protocol_error(id, make_str("1").get());
    expect_protocol_error(id, make_status("OK").get());
    expect_protocol_error(id, make_nil().get());
    expect_protocol_error(id, array_of(make_int(1)).get());
  }
}

// --- inspect ---

TEST(ClassifyInspect, ValueAndPttl) {
  const classified c = classify_reply(script_id::inspect, array_of(make_str("tok"), make_int(1234)).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.value.has_value());
  EXPECT_EQ(*c.value, "tok");
  EXPECT_EQ(c.pttl, 1234);
}

TEST(ClassifyInspect, MissingKeyHasNoValue) {
  const classified c = classify_reply(script_id::inspect, array_of(make_nil(), make_int(-2)).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  EXPECT_FALSE(c.value.has_value());
  EXPECT_EQ(c.pttl, -2);
}

TEST(ClassifyInspect, KeyWithoutExpiryReportsMinusOne) {
  const classified c = classify_reply(script_id::inspect, array_of(make_str("v"), make_int(-1)).get());
  EXPECT_EQ(c.v.status, node_status::ok);
  EXPECT_EQ(c.pttl, -1);
}

TEST(ClassifyInspect, ValueIsBinarySafe) {
  const std::string value("a\0b\xff", 4);
  const classified c = classify_reply(script_id::inspect, array_of(make_str(value), make_int(5)).get());
  ASSERT_TRUE(c.value.has_value());
  EXPECT_EQ(*c.value, value);
}

TEST(ClassifyInspect, MalformedRepliesAreProtocolErrors) {
  const script_id id = script_id::inspect;
  expect_protocol_error(id, make_str("tok").get());
  expect_protocol_error(id, make_int(1).get());
  expect_protocol_error(id, make_array({}).get());
  expect_protocol_error(id, array_of(make_str("tok")).get());
  expect_protocol_error(id, array_of(make_str("tok"), make_int(1), make_int(2)).get());
  expect_protocol_error(id, array_of(make_str("tok"), make_str("1234")).get());
  expect_protocol_error(id, array_of(make_str("tok"), make_nil()).get());
  expect_protocol_error(id, array_of(make_int(5), make_int(100)).get());
  expect_protocol_error(id, array_of(make_status("tok"), make_int(100)).get());
  expect_protocol_error(id, array_of(array_of(make_str("tok")), make_int(100)).get());
}

TEST(ClassifyReply, UnknownScriptIsAProtocolError) {
  expect_protocol_error(script_id::count, make_int(1).get());
}

// --- error replies ---

void expect_auth_error(std::string_view text) {
  SCOPED_TRACE(text);
  const classified c = classify_error(text);
  EXPECT_EQ(c.v.status, node_status::auth_error);
  EXPECT_EQ(c.v.permanent, errc::auth_failed);
  EXPECT_EQ(c.detail, text);
}

void expect_transient_server_error(std::string_view text) {
  SCOPED_TRACE(text);
  const classified c = classify_error(text);
  EXPECT_EQ(c.v.status, node_status::server_error);
  EXPECT_EQ(c.v.permanent, errc{});
  EXPECT_EQ(c.detail, text);
}

// A server whose scripts are renamed or disabled (rename-command EVAL "", a managed
// service's policy) answers "unknown command": named as such, and permanent.
TEST(ClassifyError, ScriptsUnknownToTheServerAreNamedAndPermanent) {
  for (std::string_view text :
       {std::string_view("ERR unknown command 'EVAL', with args beginning with: 'if redis.call('GET'"),
        std::string_view("ERR unknown command 'EVALSHA', with args beginning with: '5a5e'"),
        std::string_view("ERR unknown command `EVALSHA`, with args beginning with: `5a5e`")}) {
    SCOPED_TRACE(text);
    const classified c = classify_error(text);
    EXPECT_EQ(c.v.status, node_status::server_error);
    EXPECT_EQ(c.v.permanent, errc::permission_denied);
    EXPECT_NE(c.detail.find("the server does not run scripts"), std::string::npos) << c.detail;
    EXPECT_NE(c.detail.find("EVAL and EVALSHA"), std::string::npos) << c.detail;
  }
  // Another unknown command stays a plain server error.
  expect_transient_server_error("ERR unknown command 'FOO', with args beginning with: ");
}

// An ACL without @scripting refuses the command itself: the same hazard as scripts
// renamed (adversarial pass, issue 23). A key refused inside a script is not it.
TEST(ClassifyError, AnAclRefusingEvalItselfIsScriptsRefusedNotAKeyRefusal) {
  EXPECT_TRUE(is_scripts_refused_by_acl("NOPERM User noscripts has no permissions to run the 'eval' command"));
  EXPECT_TRUE(is_scripts_refused_by_acl("NOPERM this user has no permissions to run the 'eval' command"));
  // EVALSHA alone: sent again as EVAL, which the ACL may allow.
  EXPECT_FALSE(is_scripts_refused_by_acl("NOPERM User noscripts has no permissions to run the 'evalsha' command"));
  EXPECT_TRUE(is_evalsha_unavailable(
      "NOPERM this user has no permissions to run the 'evalsha' command or its subcommand"));
  EXPECT_TRUE(is_evalsha_unavailable("ERR unknown command 'EVALSHA', with args beginning with: '5a5e'"));
  EXPECT_FALSE(is_evalsha_unavailable("NOPERM User noscripts has no permissions to run the 'eval' command"));
  EXPECT_FALSE(is_evalsha_unavailable("ERR unknown command 'EVAL', with args beginning with: "));
  EXPECT_FALSE(is_scripts_refused_by_acl("NOPERM User u has no permissions to run the 'set' command"));
  EXPECT_FALSE(is_scripts_refused_by_acl("NOPERM No permissions to access a key"));
  EXPECT_FALSE(is_scripts_refused_by_acl(
      "ERR The user executing the script can't run this command or subcommand script: 5a5e, on @user_script:1."));
  EXPECT_FALSE(is_scripts_refused_by_acl("ERR unknown command 'EVAL'"));
  // Still classified as what it is: a permission refusal, named by the server's text.
  const classified c = classify_error("NOPERM User noscripts has no permissions to run the 'eval' command");
  EXPECT_EQ(c.v.permanent, errc::permission_denied);
  EXPECT_NE(c.detail.find("'eval' command"), std::string::npos) << c.detail;
}

TEST(ClassifyError, AuthenticationRefusalsAreAuthFailed) {
  expect_auth_error("NOAUTH Authentication required.");
  expect_auth_error("WRONGPASS invalid username-password pair or user is disabled.");
}

void expect_permission_denied(std::string_view text) {
  SCOPED_TRACE(text);
  const classified c = classify_error(text);
  EXPECT_EQ(c.v.status, node_status::server_error);
  EXPECT_EQ(c.v.permanent, errc::permission_denied);
  EXPECT_EQ(c.detail, text);
  EXPECT_TRUE(is_permission_error(text));
}

// An authenticated user that its ACL refuses a command or the lock key is not an
// authentication refusal: the texts Redis 7.0 sends.
TEST(ClassifyError, AclRefusalsArePermissionDeniedNotAuthFailed) {
  expect_permission_denied("NOPERM this user has no permissions to run the 'evalsha' command");
  expect_permission_denied("NOPERM this user has no permissions to access one of the keys used as arguments");
  expect_permission_denied(
      "ERR The user executing the script can't run this command or subcommand script: "
      "bd313d937edfe0881c4eee979f4a2c53c0d9bf5e, on @user_script:1.");
  EXPECT_FALSE(is_permission_error("WRONGPASS invalid username-password pair or user is disabled."));
  EXPECT_FALSE(is_permission_error("ERR unknown command"));
  EXPECT_FALSE(is_permission_error("xNOPERM"));
}

TEST(ClassifyError, DetailDropsControlCharacters) {
  const std::string text = std::string("NOPERM no\x1b[31m \x07") + "access\x7f\tto" + std::string(1, '\0') +
                           " key\r\nnext";
  const classified c = classify_error(text);
  EXPECT_EQ(c.v.permanent, errc::permission_denied);
  EXPECT_EQ(c.detail, "NOPERM no?[31m ?access??to? key");
  EXPECT_EQ(printable_line("ab\ncd", 200), "ab");
  EXPECT_EQ(printable_line("abcdef", 3), "abc");
}

TEST(ClassifyError, WrongTypeIsAPermanentServerError) {
  const classified c = classify_error("WRONGTYPE lock key holds a non-string value");
  EXPECT_EQ(c.v.status, node_status::server_error);
  EXPECT_EQ(c.v.permanent, errc::wrong_type);
  EXPECT_EQ(c.detail, "WRONGTYPE lock key holds a non-string value");
}

TEST(ClassifyError, OtherServerErrorsAreNotPermanent) {
  expect_transient_server_error("OOM command not allowed when used memory > 'maxmemory'.");
  expect_transient_server_error("READONLY You can't write against a read only replica.");
  expect_transient_server_error("MOVED 123 1.2.3.4:6379");
  expect_transient_server_error("BUSY Redis is busy running a script.");
  expect_transient_server_error("LOADING Redis is loading the dataset in memory");
  expect_transient_server_error("ERR unknown command");
  expect_transient_server_error("");
}

TEST(ClassifyError, CodeMustBeAtTheStart) {
  expect_transient_server_error("ERR NOAUTH mentioned later");
  expect_transient_server_error("ERR WRONGTYPE mentioned later");
}

TEST(ClassifyError, DetailIsTheFirstLine) {
  EXPECT_EQ(classify_error("ERR first line\r\nsecond line").detail, "ERR first line");
  EXPECT_EQ(classify_error("ERR first line\nsecond line").detail, "ERR first line");
  EXPECT_EQ(classify_error("ERR first line\rsecond line").detail, "ERR first line");
}

TEST(ClassifyError, DetailIsAtMost200Characters) {
  const std::string long_text = "ERR " + std::string(500, 'x');
  const classified c = classify_error(long_text);
  EXPECT_EQ(c.detail.size(), 200u);
  EXPECT_EQ(c.detail, long_text.substr(0, 200));

  const std::string long_first_line = "ERR " + std::string(300, 'y') + "\nsecond";
  EXPECT_EQ(classify_error(long_first_line).detail, long_first_line.substr(0, 200));

  const std::string exactly_200 = "ERR " + std::string(196, 'z');
  EXPECT_EQ(classify_error(exactly_200).detail, exactly_200);
}

TEST(ClassifyError, LongAuthErrorKeepsItsClassification) {
  const classified c = classify_error("WRONGPASS " + std::string(400, 'w'));
  EXPECT_EQ(c.v.status, node_status::auth_error);
  EXPECT_EQ(c.v.permanent, errc::auth_failed);
  EXPECT_EQ(c.detail.size(), 200u);
}

TEST(ClassifyReply, ErrorRepliesAreClassifiedTheSameForEveryScript) {
  for (script_id id : kAllScripts) {
    SCOPED_TRACE(::testing::Message() << "script " << static_cast<unsigned>(id));
    const classified auth = classify_reply(id, make_err("NOAUTH Authentication required.").get());
    EXPECT_EQ(auth.v.status, node_status::auth_error);
    EXPECT_EQ(auth.v.permanent, errc::auth_failed);
    EXPECT_EQ(auth.detail, "NOAUTH Authentication required.");

    const classified wrong =
        classify_reply(id, make_err("WRONGTYPE lock key holds a non-string value").get());
    EXPECT_EQ(wrong.v.status, node_status::server_error);
    EXPECT_EQ(wrong.v.permanent, errc::wrong_type);

    const classified oom = classify_reply(id, make_err("OOM command not allowed").get());
    EXPECT_EQ(oom.v.status, node_status::server_error);
    EXPECT_EQ(oom.v.permanent, errc{});
    EXPECT_EQ(oom.detail, "OOM command not allowed");
  }
}

TEST(ClassifyReply, ErrorTextIsTakenByLengthNotByNulTerminator) {
  const std::string text("ERR a\0b", 7);
  const classified c = classify_reply(script_id::acquire, make_err(text).get());
  EXPECT_EQ(c.v.status, node_status::server_error);
  EXPECT_EQ(c.detail, "ERR a?b");  // by length (the b is kept); the NUL is not printable
}

// --- the same shapes as hiredis' reader produces them from the wire ---

TEST(ClassifyWireReply, FencedAcquireAsSentByRedis) {
  // {1, GET counter}: Lua strings arrive as bulk strings.
  const parsed_reply r = parse_resp("*2\r\n:1\r\n$2\r\n41\r\n");
  ASSERT_NE(r, nullptr);
  const classified c = classify_reply(script_id::acquire_fenced, r.get());
  EXPECT_EQ(c.v.status, node_status::ok);
  ASSERT_TRUE(c.fence.has_value());
  EXPECT_EQ(*c.fence, 41u);
}

TEST(ClassifyWireReply, HeldAcquireAsSentByRedis) {
  const parsed_reply r = parse_resp("*2\r\n:0\r\n$1\r\n0\r\n");
  ASSERT_NE(r, nullptr);
  const classified c = classify_reply(script_id::acquire, r.get());
  EXPECT_EQ(c.v.status, node_status::held);
  EXPECT_FALSE(c.fence.has_value());
}

TEST(ClassifyWireReply, InspectOfMissingKeyAsSentByRedis) {
  const parsed_reply r = parse_resp("*2\r\n$-1\r\n:-2\r\n");
  ASSERT_NE(r, nullptr);
  const classified c = classify_reply(script_id::inspect, r.get());
  EXPECT_EQ(c.v.status, node_status::ok);
  EXPECT_FALSE(c.value.has_value());
  EXPECT_EQ(c.pttl, -2);
}

TEST(ClassifyWireReply, WrongPassAsSentByRedis) {
  const parsed_reply r = parse_resp("-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  ASSERT_NE(r, nullptr);
  const classified c = classify_reply(script_id::release, r.get());
  EXPECT_EQ(c.v.status, node_status::auth_error);
  EXPECT_EQ(c.v.permanent, errc::auth_failed);
  EXPECT_EQ(c.detail, "WRONGPASS invalid username-password pair or user is disabled.");
}

}  // namespace
}  // namespace redlock::detail

namespace redlock::detail {
namespace {

TEST(ClassifyPing, PongIsOkAnythingElseIsAProtocolError) {
  redisReply pong{};
  pong.type = REDIS_REPLY_STATUS;
  char text[] = "PONG";
  pong.str = text;
  pong.len = 4;
  EXPECT_EQ(classify_reply(script_id::ping, &pong).v.status, node_status::ok);
  char other[] = "OK";
  pong.str = other;
  pong.len = 2;
  EXPECT_EQ(classify_reply(script_id::ping, &pong).v.status, node_status::protocol_error);
}

}  // namespace
}  // namespace redlock::detail

namespace redlock::detail {
namespace {

TEST(ClassifyAcquireSet, NilIsGrantedAStringIsHeldWrongTypeIsPermanent) {
  redisReply nil{};
  nil.type = REDIS_REPLY_NIL;
  EXPECT_EQ(classify_reply(script_id::acquire_set, &nil).v.status, node_status::ok);
  redisReply holder{};
  holder.type = REDIS_REPLY_STRING;
  char tok[] = "0123456789abcdef0123456789abcdef";
  holder.str = tok;
  holder.len = 32;
  EXPECT_EQ(classify_reply(script_id::acquire_set, &holder).v.status, node_status::held);
  // The holder's token: a waiting acquire matches it with release notifications.
  EXPECT_EQ(classify_reply(script_id::acquire_set, &holder).value, std::string(tok));
  redisReply err{};
  err.type = REDIS_REPLY_ERROR;
  char text[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
  err.str = text;
  err.len = sizeof text - 1;
  const classified c = classify_reply(script_id::acquire_set, &err);
  EXPECT_EQ(c.v.status, node_status::server_error);
  EXPECT_EQ(c.v.permanent, errc::wrong_type);
  redisReply integer{};
  integer.type = REDIS_REPLY_INTEGER;
  integer.integer = 1;
  EXPECT_EQ(classify_reply(script_id::acquire_set, &integer).v.status, node_status::protocol_error);
}

}  // namespace
}  // namespace redlock::detail
