// Unit tests of the redlock tool's pure parts: durations, the command line, JSON,
// latency statistics and command lookup; and of the readers of docs/monitoring/'s
// files that cli_test uses. No network.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "duration.h"
#include "json.h"
#include "http.h"
#include "latency.h"
#include "monitor_view.h"
#include "monitoring_files.h"
#include "process.h"
#include "secrets.h"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;
using kind = parse_result::kind;

constexpr const char* nodes = "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003";

parse_result parse(std::vector<std::string> args, const char* env = nodes) {
  return parse_command_line(args, env);
}

// --- durations ---

TEST(Duration, AcceptsPlainMillisecondsAndUnits) {
  EXPECT_EQ(parse_duration("0"), milliseconds(0));
  EXPECT_EQ(parse_duration("250"), milliseconds(250));
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("30s"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("2m"), milliseconds(120'000));
  EXPECT_EQ(parse_duration("007s"), milliseconds(7'000));
}

TEST(Duration, RejectsGarbageSignsFractionsAndOtherUnits) {
  for (const char* bad : {"",   "ms", "s",   "-1",   "+1", "-5s", "1.5", "1e3", " 1",  "1 ",  "1 s",
                          "1H", "1d", "1us", "1sec", "1M", "1MS", "0x10", "1s2", "abc", "1ms5",
                          ".5s", "1.s", "1..5s", "1.5.5s", "1,5s", "0.5", "-0.5s"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(Duration, AcceptsHoursAndFractionsWithAUnit) {
  EXPECT_EQ(parse_duration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(parse_duration("0.5s"), milliseconds(500));
  EXPECT_EQ(parse_duration("0.25m"), milliseconds(15'000));
  EXPECT_EQ(parse_duration("1.5h"), milliseconds(5'400'000));
  EXPECT_EQ(parse_duration("0.001s"), milliseconds(1));
  EXPECT_EQ(parse_duration("2.0ms"), milliseconds(2));
  EXPECT_EQ(parse_duration("1.500000000000000s"), milliseconds(1500));  // trailing zeros are exact
  EXPECT_EQ(parse_duration("0.0001h"), milliseconds(360));
}

TEST(Duration, RefusesSubMillisecondPrecisionAndBareFractionsSayingWhy) {
  std::string why;
  for (const char* bad : {"1.5ms", "0.0005s", "1.0001s", "0.00001m", "0.0000001h", "0.1234567891s"}) {
    why.clear();
    EXPECT_FALSE(parse_duration(bad, &why).has_value()) << bad;
    EXPECT_EQ(why, "finer than a millisecond") << bad;
  }
  EXPECT_FALSE(parse_duration("1.5", &why).has_value());
  EXPECT_EQ(why, "a fraction needs a unit");
  EXPECT_FALSE(parse_duration("5d", &why).has_value());
  EXPECT_EQ(why, "unknown unit");
}

TEST(Duration, RejectsValuesAboveTheMaximumWithoutOverflow) {
  EXPECT_EQ(parse_duration("1000000000000"), max_duration);
  EXPECT_FALSE(parse_duration("1000000000001").has_value());
  EXPECT_FALSE(parse_duration("1000000001s").has_value());
  EXPECT_FALSE(parse_duration("16666667m").has_value());
  EXPECT_FALSE(parse_duration("99999999999999999999").has_value());
  EXPECT_FALSE(parse_duration("18446744073709551617ms").has_value());
  EXPECT_FALSE(parse_duration("9223372036854775807s").has_value());
  EXPECT_EQ(parse_duration("277777h"), milliseconds(999'997'200'000));
  EXPECT_FALSE(parse_duration("277778h").has_value());
  EXPECT_FALSE(parse_duration("277777.9h").has_value());
  EXPECT_EQ(parse_duration("999999999.999s"), milliseconds(999'999'999'999));
  EXPECT_FALSE(parse_duration("1000000000.001s").has_value());
}

TEST(Duration, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(format_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(30'000)), "30s");
  EXPECT_EQ(format_duration(milliseconds(120'000)), "2m");
  EXPECT_EQ(format_duration(milliseconds(7'200'000)), "2h");
  EXPECT_EQ(format_duration(milliseconds(5'400'000)), "90m");
  for (long long v : {0LL, 1LL, 999LL, 1000LL, 61'000LL, 3'600'000LL}) {
    EXPECT_EQ(parse_duration(format_duration(milliseconds(v))), milliseconds(v));
  }
}

// --- command line ---

TEST(CommandLine, AcquireWithAllItsOptionsInEitherForm) {
  const parse_result r =
      parse({"acquire", "--ttl", "30s", "jobs/nightly", "--wait=2s", "--retry-delay", "50ms", "--fencing",
             "--json", "-q", "--node-timeout=20", "--connect-timeout", "1s", "--drift-factor", "0.02"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  const invocation& inv = r.inv;
  EXPECT_EQ(inv.cmd, command::acquire);
  EXPECT_EQ(inv.resource, "jobs/nightly");
  EXPECT_EQ(inv.ttl, milliseconds(30'000));
  EXPECT_EQ(inv.wait, milliseconds(2'000));
  EXPECT_EQ(inv.retry_delay, milliseconds(50));
  EXPECT_TRUE(inv.fencing);
  EXPECT_TRUE(inv.json);
  EXPECT_TRUE(inv.quiet);
  EXPECT_EQ(inv.node_timeout, milliseconds(20));
  EXPECT_EQ(inv.connect_timeout, milliseconds(1000));
  EXPECT_DOUBLE_EQ(inv.drift_factor, 0.02);
  EXPECT_EQ(inv.nodes.size(), 3u);
}

TEST(CommandLine, DefaultsMatchTheHelpText) {
  const parse_result r = parse({"acquire", "r", "--ttl", "1s"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  EXPECT_EQ(r.inv.wait, milliseconds(0));
  EXPECT_EQ(r.inv.retry_delay, milliseconds(200));
  EXPECT_EQ(r.inv.node_timeout, milliseconds(50));
  EXPECT_EQ(r.inv.connect_timeout, milliseconds(200));
  EXPECT_DOUBLE_EQ(r.inv.drift_factor, 0.01);
  EXPECT_FALSE(r.inv.fencing);
  EXPECT_FALSE(r.inv.json);
  const parse_result b = parse({"bench"});
  ASSERT_EQ(b.what, kind::ok) << b.error;
  EXPECT_EQ(b.inv.clients, 4);
  EXPECT_EQ(b.inv.resources, 100);
  EXPECT_EQ(b.inv.duration, milliseconds(5000));
  EXPECT_EQ(b.inv.ttl, milliseconds(10'000));
  const parse_result run = parse({"run", "r", "--ttl", "1s", "--", "true"});
  ASSERT_EQ(run.what, kind::ok) << run.error;
  EXPECT_EQ(run.inv.kill_after, milliseconds(10'000));
}

TEST(CommandLine, ReleaseAndExtendTakeResourceAndToken) {
  const parse_result rel = parse({"release", "r", "tok"});
  ASSERT_EQ(rel.what, kind::ok) << rel.error;
  EXPECT_EQ(rel.inv.cmd, command::release);
  EXPECT_EQ(rel.inv.resource, "r");
  EXPECT_EQ(rel.inv.token, "tok");
  const parse_result ext = parse({"extend", "--ttl=5s", "r", "tok"});
  ASSERT_EQ(ext.what, kind::ok) << ext.error;
  EXPECT_EQ(ext.inv.ttl, milliseconds(5000));
  EXPECT_EQ(ext.inv.token, "tok");
}

TEST(CommandLine, RunTakesEverythingAfterDoubleDashVerbatim) {
  const parse_result r =
      parse({"run", "r", "--ttl", "1s", "--kill-after", "0", "--", "sh", "-c", "echo --ttl", "--", "--json"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  EXPECT_EQ(r.inv.argv, (std::vector<std::string>{"sh", "-c", "echo --ttl", "--", "--json"}));
  EXPECT_FALSE(r.inv.json);
  EXPECT_EQ(r.inv.kill_after, milliseconds(0));
}

TEST(CommandLine, NodesOptionOverridesTheEnvironmentAndIsTrimmed) {
  const parse_result r = parse({"status", "r", "--nodes", " redis://a:1 , unix:///tmp/s.sock "});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  EXPECT_EQ(r.inv.nodes, (std::vector<std::string>{"redis://a:1", "unix:///tmp/s.sock"}));
  const parse_result env = parse({"status", "r"}, "redis://b:2");
  ASSERT_EQ(env.what, kind::ok) << env.error;
  EXPECT_EQ(env.inv.nodes, (std::vector<std::string>{"redis://b:2"}));
}

TEST(CommandLine, LastRepeatedOptionWins) {
  const parse_result r = parse({"acquire", "r", "--ttl", "1s", "--ttl", "2s"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  EXPECT_EQ(r.inv.ttl, milliseconds(2000));
}

TEST(CommandLine, HelpAndVersion) {
  EXPECT_EQ(parse({"--help"}).what, kind::help);
  EXPECT_EQ(parse({"-h"}).what, kind::help);
  EXPECT_EQ(parse({"help"}).what, kind::help);
  EXPECT_EQ(parse({"acquire", "--help"}).what, kind::help);
  EXPECT_EQ(parse({"run", "r", "-h", "--", "x"}).what, kind::help);
  EXPECT_EQ(parse({"--version"}).what, kind::version);
  EXPECT_EQ(parse({"-V"}).what, kind::version);
  EXPECT_FALSE(parse({"--help"}).help_for.has_value());
  EXPECT_FALSE(parse({"help"}).help_for.has_value());
  EXPECT_EQ(parse({"help", "run"}).help_for, command::run);
  EXPECT_EQ(parse({"run", "--help"}).help_for, command::run);
  EXPECT_EQ(parse({"release", "-h"}).help_for, command::release);
  EXPECT_EQ(parse({"help", "bogus"}).what, kind::error);
  EXPECT_EQ(parse({"help", "run", "extra"}).what, kind::error);
  // After "--" a -h belongs to the command.
  EXPECT_EQ(parse({"run", "r", "--ttl", "1s", "--", "ls", "-h"}).what, kind::ok);
}

struct bad_case {
  std::vector<std::string> args;
  const char* env;
  const char* message_part;
  kind expected = kind::error;  // config_error: exit 78
};

void PrintTo(const bad_case& c, std::ostream* os) {
  *os << "redlock";
  for (const auto& a : c.args) *os << " '" << a << "'";
}

class CommandLineRejects : public ::testing::TestWithParam<bad_case> {};

TEST_P(CommandLineRejects, WithAOneLineMessage) {
  const bad_case& c = GetParam();
  const parse_result r = parse_command_line(c.args, c.env);
  ASSERT_EQ(r.what, c.expected) << r.error;
  EXPECT_NE(r.error.find(c.message_part), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, CommandLineRejects,
    ::testing::Values(
        bad_case{{}, nodes, "missing command"},
        bad_case{{"frobnicate"}, nodes, "unknown command \"frobnicate\""},
        bad_case{{"--ttl", "1s", "acquire"}, nodes, "expected a command"},
        bad_case{{"acquire", "--ttl", "1s"}, nodes, "acquire needs RESOURCE"},
        bad_case{{"acquire", "", "--ttl", "1s"}, nodes, "RESOURCE must not be empty"},
        bad_case{{"acquire", "r"}, nodes, "acquire needs --ttl"},
        bad_case{{"extend", "r", "t"}, nodes, "extend needs --ttl"},
        bad_case{{"run", "r", "--", "true"}, nodes, "run needs --ttl"},
        bad_case{{"acquire", "r", "--ttl", "abc"}, nodes, "bad duration \"abc\""},
        bad_case{{"acquire", "r", "--ttl", "-5"}, nodes, "bad duration \"-5\""},
        bad_case{{"acquire", "r", "--ttl", "0"}, nodes, "--ttl must be greater than 0"},
        bad_case{{"acquire", "r", "--ttl", "2ms"}, nodes, "too short"},
        bad_case{{"acquire", "r", "--ttl", "3", "--drift-factor", "0.49"}, nodes, "too short"},
        bad_case{{"acquire", "r", "--ttl", "99999999999999999999"}, nodes, "bad duration"},
        bad_case{{"acquire", "r", "--ttl"}, nodes, "--ttl needs a value"},
        bad_case{{"acquire", "r", "--ttl", "1s", "--wait", "soon"}, nodes, "--wait: bad duration"},
        bad_case{{"acquire", "r", "--ttl", "1s", "--retry-delay", "0"},
                 nodes,
                 "--retry-delay must be greater than 0"},
        bad_case{{"acquire", "r", "--ttl", "1s", "--frobnicate"}, nodes, "unknown option \"--frobnicate\""},
        bad_case{{"acquire", "r", "--ttl", "1s", "-x"}, nodes, "unknown option \"-x\""},
        bad_case{{"acquire", "r", "--ttl", "1s", "--json=yes"}, nodes, "--json takes no value"},
        bad_case{{"acquire", "r", "--ttl", "1s", "--kill-after", "1s"}, nodes, "--kill-after does not apply"},
        bad_case{{"release", "r", "t", "--ttl", "1s"}, nodes, "--ttl does not apply to release"},
        bad_case{{"status", "r", "--fencing"}, nodes, "--fencing does not apply to status"},
        bad_case{{"release", "r"}, nodes, "release needs TOKEN"},
        bad_case{{"release"}, nodes, "release needs RESOURCE and TOKEN"},
        bad_case{{"release", "r", "t", "--token", "u"}, nodes, "conflicting options", kind::config_error},
        bad_case{{"release", "r", "--token="}, nodes, "--token must not be empty"},
        bad_case{{"acquire", "r", "--ttl", "1s", "--token", "t"}, nodes, "--token does not apply to acquire"},
        bad_case{{"acquire", "r", "--ttl", "1.5"}, nodes, "a fraction needs a unit"},
        bad_case{{"acquire", "r", "--ttl", "1.0005s"}, nodes, "finer than a millisecond"},
        bad_case{{"status", "r", "--password-file", ""}, nodes, "--password-file needs a non-empty value"},
        bad_case{{"status", "r", "--tls-cert", "c.pem"}, nodes, "needs its key", kind::config_error},
        bad_case{{"status", "r", "--tls-key", "k.pem"}, nodes, "needs its certificate", kind::config_error},
        bad_case{{"status", "r", "--tls-insecure=1"}, nodes, "--tls-insecure takes no value"},
        bad_case{{"status", "r", "--tls-ca"}, nodes, "--tls-ca needs a value"},
        bad_case{{"release", "r", ""}, nodes, "TOKEN must not be empty"},
        bad_case{{"status", "r", "extra"}, nodes, "unexpected argument \"extra\""},
        bad_case{{"bench", "r"}, nodes, "unexpected argument \"r\""},
        bad_case{{"status", "r", "--", "x"}, nodes, "status takes no \"--\""},
        bad_case{{"run", "r", "--ttl", "1s"}, nodes, "run needs a command after \"--\""},
        bad_case{{"run", "r", "--ttl", "1s", "--"}, nodes, "run needs a command after \"--\""},
        bad_case{{"run", "r", "--ttl", "1s", "--", ""}, nodes, "must not be empty"},
        bad_case{{"status", "r"}, nullptr, "no nodes", kind::config_error},
        bad_case{{"status", "r"}, "  ", "no nodes", kind::config_error},
        bad_case{{"status", "r"}, "redis://a:1,,redis://b:2", "REDLOCK_NODES: empty URI", kind::config_error},
        bad_case{{"status", "r", "--nodes", ""}, nodes, "--nodes: empty node list", kind::config_error},
        bad_case{{"status", "r", "--nodes", "redis://a:1,"}, nodes, "--nodes: empty URI", kind::config_error},
        bad_case{{"status", "r", "--node-timeout", "0"}, nodes, "--node-timeout must be greater than 0"},
        bad_case{{"status", "r", "--connect-timeout", "1.5"}, nodes, "--connect-timeout: bad duration"},
        bad_case{{"status", "r", "--drift-factor", "0.5"}, nodes, "--drift-factor"},
        bad_case{{"status", "r", "--drift-factor", "-0.1"}, nodes, "--drift-factor"},
        bad_case{{"status", "r", "--drift-factor", "nan"}, nodes, "--drift-factor"},
        bad_case{{"status", "r", "--drift-factor", "0.1x"}, nodes, "--drift-factor"},
        bad_case{{"bench", "--clients", "0"}, nodes, "--clients"},
        bad_case{{"bench", "--clients", "1001"}, nodes, "--clients"},
        bad_case{{"bench", "--resources", "-1"}, nodes, "--resources"},
        bad_case{{"bench", "--duration", "0"}, nodes, "--duration must be greater than 0"}));

TEST(CommandLine, TtlMustExceedTheDrift) {
  EXPECT_FALSE(ttl_exceeds_drift(milliseconds(2), 0.01));
  EXPECT_TRUE(ttl_exceeds_drift(milliseconds(3), 0.01));
  EXPECT_FALSE(ttl_exceeds_drift(milliseconds(3), 0.49));  // 3 <= 3 * 0.49 + 2
  EXPECT_TRUE(ttl_exceeds_drift(milliseconds(4), 0.49));
  EXPECT_FALSE(ttl_exceeds_drift(milliseconds(0), 0));
}

TEST(CommandLine, HelpTextNamesEveryCommandAndExitStatus) {
  const std::string help = help_text();
  for (const char* word :
       {"acquire", "release", "extend", "run", "status", "bench", "--kill-after", "REDLOCK_NODES",
        "REDLOCK_FENCE", " 64 ", " 69 ", " 70 ", " 75 ", " 126 ", " 127 "}) {
    EXPECT_NE(help.find(word), std::string::npos) << word;
  }
}

// --- JSON ---

TEST(Json, QuotesAndEscapes) {
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92\"");
}

TEST(Json, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(json_quote("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json_quote("a\xc3"), "\"a\\ufffd\"");                      // truncated
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
}

TEST(Json, WriterPlacesCommasAndNests) {
  json_writer j;
  j.begin_object().key("s").string("x").key("n").number(std::int64_t{-3}).key("u").number(std::uint64_t{7});
  j.key("b").boolean(false).key("z").null().key("o").string_or_null(std::nullopt);
  j.key("a").begin_array().number(1.25, 2).begin_object().end_object().begin_array().end_array().end_array();
  j.key("inf").number(1.0 / 0.0, 1);
  j.end_object();
  EXPECT_EQ(j.str(), R"({"s":"x","n":-3,"u":7,"b":false,"z":null,"o":null,"a":[1.25,{},[]],"inf":null})");
}

// --- latency statistics ---

TEST(Latency, EmptyHistogramIsAllZero) {
  latency_histogram h;
  const latency_summary s = summarize(h);
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50_us, 0u);
  EXPECT_EQ(s.max_us, 0u);
}

TEST(Latency, SmallValuesAreExactNearestRank) {
  latency_histogram h;
  for (std::uint64_t v = 1; v <= 1000; ++v) h.record(v);
  EXPECT_EQ(h.percentile(50), 500u);
  EXPECT_EQ(h.percentile(90), 900u);
  EXPECT_EQ(h.percentile(99), 990u);
  EXPECT_EQ(h.percentile(99.9), 999u);
  EXPECT_EQ(h.percentile(100), 1000u);
  EXPECT_EQ(h.percentile(0.01), 1u);
  EXPECT_EQ(h.max(), 1000u);
}

TEST(Latency, LargeValuesAreWithinATenthOfAPercent) {
  for (std::uint64_t v : {2048ull, 2049ull, 5000ull, 123'456ull, 10'000'000ull, 987'654'321'012ull}) {
    latency_histogram h;
    h.record(v);
    h.record(v + 100'000'000'000'000ull);  // the max, far above
    const std::uint64_t p = h.percentile(50);
    EXPECT_GE(p, v);
    EXPECT_LE(static_cast<double>(p - v), static_cast<double>(v) * 0.001) << v;
  }
}

TEST(Latency, PercentileNeverExceedsTheMaximum) {
  latency_histogram h;
  h.record(100'001);
  EXPECT_EQ(h.percentile(50), 100'001u);
  EXPECT_EQ(summarize(h).max_us, 100'001u);
}

TEST(Latency, PercentilesAreOrdered) {
  latency_histogram h;
  std::uint64_t x = 12345;
  for (int i = 0; i < 10'000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    h.record((x >> 40) % 50'000);
  }
  const latency_summary s = summarize(h);
  EXPECT_LE(s.p50_us, s.p90_us);
  EXPECT_LE(s.p90_us, s.p99_us);
  EXPECT_LE(s.p99_us, s.p999_us);
  EXPECT_LE(s.p999_us, s.max_us);
  EXPECT_EQ(s.count, 10'000u);
}

TEST(Latency, FloorRatioUsesTheQuorumthFastestNode) {
  // Medians 10, 40, 20, (down), 30: sorted 10, 20, 30, 40; quorum 3 -> 30.
  const std::vector<std::optional<std::uint64_t>> rtts = {10, 40, 20, std::nullopt, 30};
  EXPECT_DOUBLE_EQ(*floor_ratio(300, rtts, 3), 10.0);
  EXPECT_DOUBLE_EQ(*floor_ratio(300, rtts, 1), 30.0);
  EXPECT_FALSE(floor_ratio(300, {10, std::nullopt, std::nullopt}, 2).has_value());
  EXPECT_DOUBLE_EQ(*floor_ratio(5, {0}, 1), 5.0);  // a 0 us round trip counts as 1 us
}

// --- command lookup and environment ---

class CommandLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/redlock-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const char* f : {"/a/tool", "/b/tool", "/a/plain"}) ::unlink((dir_ + f).c_str());
    ::rmdir((dir_ + "/a").c_str());
    ::rmdir((dir_ + "/b").c_str());
    ::rmdir(dir_.c_str());
  }
  void make(const std::string& rel, mode_t mode) {
    const std::string path = dir_ + rel;
    ::mkdir(path.substr(0, path.rfind('/')).c_str(), 0700);
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), mode);
  }
  std::string dir_;
};

TEST_F(CommandLookup, FindsTheFirstExecutableInPath) {
  make("/a/tool", 0600);  // not executable: skipped
  make("/b/tool", 0700);
  const std::string path = dir_ + "/a:" + dir_ + "/b";
  const resolved_command r = resolve_command("tool", path.c_str());
  EXPECT_EQ(r.error, 0);
  EXPECT_EQ(r.path, dir_ + "/b/tool");
}

TEST_F(CommandLookup, ReportsNotExecutableAndNotFoundLikeAShell) {
  // Mode 0600 has no x bit, so even root gets EACCES.
  make("/a/plain", 0600);
  const std::string path = dir_ + "/a";
  EXPECT_EQ(resolve_command("plain", path.c_str()).error, EACCES);
  EXPECT_EQ(resolve_command("missing", path.c_str()).error, ENOENT);
  EXPECT_EQ(resolve_command(dir_ + "/a/plain", nullptr).error, EACCES);
  EXPECT_EQ(resolve_command(dir_ + "/a", nullptr).error, EACCES);  // a directory
  EXPECT_EQ(resolve_command(dir_ + "/nope/x", nullptr).error, ENOENT);
  EXPECT_EQ(resolve_command("sh", "/nonexistent:/bin:/usr/bin").error, 0);
}

TEST(LockEnvironment, ReplacesInheritedLockVariablesAndDropsThePassword) {
  std::string a = "PATH=/bin", b = "REDLOCK_TOKEN=old", c = "REDLOCK_FENCE=9",
              d = "REDLOCK_NODES=redis://:secret@x", e = "REDLOCK_PASSWORD=secret";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), e.data(), nullptr};
  EXPECT_EQ(lock_environment(env, "res", "tok", std::nullopt, "redis://x"),
            (std::vector<std::string>{"PATH=/bin", "REDLOCK_NODES=redis://x", "REDLOCK_RESOURCE=res",
                                      "REDLOCK_TOKEN=tok"}));
  EXPECT_EQ(lock_environment(env, "res", "tok", 42, "redis://x").back(), "REDLOCK_FENCE=42");
  EXPECT_EQ(lock_environment(env, "res", "tok", std::nullopt, ""),
            (std::vector<std::string>{"PATH=/bin", "REDLOCK_RESOURCE=res", "REDLOCK_TOKEN=tok"}));
  std::string f = "REDLOCK_PERMIT=7";
  char* nested[] = {a.data(), f.data(), nullptr};
  EXPECT_EQ(lock_environment(nested, "res", "tok", std::nullopt, ""),
            (std::vector<std::string>{"PATH=/bin", "REDLOCK_RESOURCE=res", "REDLOCK_TOKEN=tok"}));
  EXPECT_EQ(lock_environment(nested, "s:permit:1", "tok", 3, "", 1),
            (std::vector<std::string>{"PATH=/bin", "REDLOCK_RESOURCE=s:permit:1", "REDLOCK_TOKEN=tok",
                                      "REDLOCK_FENCE=3", "REDLOCK_PERMIT=1"}));
}

TEST(ShellStatus, ExitCodeOr128PlusSignal) {
  EXPECT_EQ(shell_status(3 << 8), 3);
  EXPECT_EQ(shell_status(0), 0);
  EXPECT_EQ(shell_status(15), 128 + 15);       // killed by SIGTERM
  EXPECT_EQ(shell_status(9 | 0x80), 128 + 9);  // killed by SIGKILL, core dumped
}

// --- max ttl ---

TEST(MaxTtl, DefaultsToTenMinutesAndAdmitsTheReadmesFiveMinuteTtl) {
  const parse_result r = parse({"acquire", "deploy", "--ttl", "5m"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  EXPECT_EQ(r.inv.max_ttl, milliseconds(600'000));
}

TEST(MaxTtl, ATtlAboveTheBoundIsAUsageErrorNamingIt) {
  const parse_result r = parse({"acquire", "deploy", "--ttl", "11m"});
  ASSERT_EQ(r.what, kind::error);
  EXPECT_NE(r.error.find("--ttl 11m exceeds --max-ttl 10m"), std::string::npos) << r.error;
  EXPECT_EQ(parse({"extend", "deploy", "tok", "--ttl", "11m"}).what, kind::error);
  EXPECT_EQ(parse({"run", "deploy", "--ttl", "11m", "--", "true"}).what, kind::error);
}

TEST(MaxTtl, OptionThenEnvironmentSetTheBound) {
  const parse_result opt = parse({"acquire", "deploy", "--ttl", "11m", "--max-ttl", "60m"});
  ASSERT_EQ(opt.what, kind::ok) << opt.error;
  EXPECT_EQ(opt.inv.max_ttl, milliseconds(3600000));
  const parse_result env = parse_command_line({"acquire", "deploy", "--ttl", "11m"}, nodes, "120m");
  ASSERT_EQ(env.what, kind::ok) << env.error;
  EXPECT_EQ(env.inv.max_ttl, milliseconds(7'200'000));
  const parse_result both = parse_command_line({"status", "x", "--max-ttl=30s"}, nodes, "120m");
  ASSERT_EQ(both.what, kind::ok) << both.error;
  EXPECT_EQ(both.inv.max_ttl, milliseconds(30'000));
  const parse_result bad = parse_command_line({"status", "x"}, nodes, "soon");
  ASSERT_EQ(bad.what, kind::config_error);
  EXPECT_NE(bad.error.find("REDLOCK_MAX_TTL"), std::string::npos) << bad.error;
  EXPECT_EQ(parse({"status", "x", "--max-ttl", "0"}).what, kind::error);
}


// --- secrets, tokens, TLS and warnings on the command line ---

environment env_with(const char* password = nullptr, const char* token = nullptr) {
  environment e;
  e.nodes = nodes;
  e.password = password;
  e.token = token;
  return e;
}

bool has_warning(const parse_result& r, const std::string& part) {
  for (const auto& w : r.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(Secrets, PasswordComesFromTheFileOptionElseTheEnvironment) {
  const parse_result env = parse_command_line({"status", "r"}, env_with("s3cret"));
  ASSERT_EQ(env.what, kind::ok) << env.error;
  EXPECT_EQ(env.inv.password, "s3cret");
  EXPECT_TRUE(env.inv.password_file.empty());
  EXPECT_TRUE(env.warnings.empty());
  const parse_result file = parse_command_line({"status", "r", "--password-file", "/run/pw"}, env_with("s3cret"));
  ASSERT_EQ(file.what, kind::ok) << file.error;
  EXPECT_EQ(file.inv.password_file, "/run/pw");
  EXPECT_EQ(file.inv.password, "") << "the file wins; it is read later";
}

TEST(Secrets, APasswordInNodesOnTheCommandLineWarnsAndMarksTheArgumentForScrubbing) {
  const parse_result r = parse({"status", "r", "--json", "--nodes", "redis://:pw@a:1,redis://b:2"});
  ASSERT_EQ(r.what, kind::ok) << r.error;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(has_warning(r, "visible to other users")) << r.warnings[0];
  EXPECT_EQ(r.warnings[0].find("pw@"), std::string::npos);
  EXPECT_EQ(r.secret_args, std::vector<std::size_t>{4});
  const parse_result eq = parse({"status", "--nodes=redis://u:pw@a:1", "r"});
  EXPECT_EQ(eq.secret_args, std::vector<std::size_t>{1});
  // From REDLOCK_NODES: nothing on argv, no warning.
  const parse_result env = parse({"status", "r"}, "redis://:pw@a:1");
  EXPECT_TRUE(env.warnings.empty());
  EXPECT_TRUE(env.secret_args.empty());
  EXPECT_TRUE(parse({"status", "r", "--nodes", "redis://alice@a:1"}).warnings.empty());
}

// Review 11: --nodes given twice (a retyped command line, a wrapper adding its own
// default). Only the last value was marked for scrubbing, so the first one's
// password stayed in /proc/PID/cmdline for the whole run; and when the last value
// had no password, nothing was scrubbed at all.
TEST(Secrets, EveryNodesArgumentWithAPasswordIsScrubbedNotOnlyTheLast) {
  const parse_result both = parse({"status", "r", "--nodes", "redis://:one@a:1", "--nodes=redis://:two@b:2"});
  ASSERT_EQ(both.what, kind::ok) << both.error;
  EXPECT_EQ(both.secret_args, (std::vector<std::size_t>{3, 4}));
  const parse_result first_only = parse({"status", "--nodes", "redis://:one@a:1", "r", "--nodes", "redis://b:2"});
  ASSERT_EQ(first_only.what, kind::ok) << first_only.error;
  EXPECT_EQ(first_only.secret_args, std::vector<std::size_t>{2});
  EXPECT_TRUE(has_warning(first_only, "visible to other users"));
}

TEST(Secrets, TokenFromArgumentOptionStdinOrEnvironment) {
  const parse_result arg = parse_command_line({"release", "r", "tok"}, env_with(nullptr, "envtok"));
  ASSERT_EQ(arg.what, kind::ok) << arg.error;
  EXPECT_EQ(arg.inv.token, "tok");
  const parse_result env = parse_command_line({"release", "r"}, env_with(nullptr, "envtok"));
  ASSERT_EQ(env.what, kind::ok) << env.error;
  EXPECT_EQ(env.inv.token, "envtok");
  EXPECT_FALSE(env.inv.token_from_stdin);
  const parse_result opt = parse_command_line({"extend", "r", "--token", "o", "--ttl", "1s"}, env_with(nullptr, "e"));
  ASSERT_EQ(opt.what, kind::ok) << opt.error;
  EXPECT_EQ(opt.inv.token, "o");
  for (const auto& args : {std::vector<std::string>{"release", "r", "--token", "-"},
                           std::vector<std::string>{"release", "r", "-"},
                           std::vector<std::string>{"release", "--token=-", "r"}}) {
    const parse_result in = parse_command_line(args, env_with(nullptr, "e"));
    ASSERT_EQ(in.what, kind::ok) << in.error;
    EXPECT_TRUE(in.inv.token_from_stdin);
    EXPECT_EQ(in.inv.token, "");
  }
  EXPECT_EQ(parse_command_line({"release", "r"}, env_with(nullptr, "")).what, kind::error);
}

TEST(Secrets, AddPasswordFillsOnlyUrisWithoutOne) {
  std::string out, error;
  ASSERT_TRUE(add_password("redis://127.0.0.1:7001", "p@ss:w/rd", out, error));
  EXPECT_EQ(out, "redis://:p%40ss%3Aw%2Frd@127.0.0.1:7001");
  ASSERT_TRUE(add_password("redis://alice@h:1/2", "pw", out, error));
  EXPECT_EQ(out, "redis://alice:pw@h:1/2");
  ASSERT_TRUE(add_password("REDISS://h", "pw", out, error));
  EXPECT_EQ(out, "REDISS://:pw@h");
  ASSERT_TRUE(add_password("redis://bob:own@h", "pw", out, error));
  EXPECT_EQ(out, "redis://bob:own@h");
  // A Redis Cluster or a Sentinel group as one node: one set of credentials for all of it.
  ASSERT_TRUE(add_password("redis+cluster://127.0.0.1:7000?seed=127.0.0.1:7001", "p w", out, error));
  EXPECT_EQ(out, "redis+cluster://:p%20w@127.0.0.1:7000?seed=127.0.0.1:7001");
  ASSERT_TRUE(add_password("rediss+sentinel://alice@127.0.0.1:26379/cache", "pw", out, error));
  EXPECT_EQ(out, "rediss+sentinel://alice:pw@127.0.0.1:26379/cache");
  ASSERT_TRUE(add_password("Redis+Sentinel://127.0.0.1:26379/cache", "pw", out, error));
  EXPECT_EQ(out, "Redis+Sentinel://:pw@127.0.0.1:26379/cache");
  ASSERT_TRUE(add_password("rediss+cluster://bob:own@h:1", "pw", out, error));
  EXPECT_EQ(out, "rediss+cluster://bob:own@h:1");
  ASSERT_TRUE(add_password("http://h", "pw", out, error));  // the library names the bad scheme
  EXPECT_EQ(out, "http://h");
  EXPECT_FALSE(add_password("unix:///tmp/r.sock", "pw", out, error));
  EXPECT_NE(error.find("unix:///tmp/r.sock"), std::string::npos) << error;
  EXPECT_EQ(error.find("pw"), std::string::npos) << error;
}

TEST(Secrets, RemovePasswordKeepsTheUser) {
  EXPECT_EQ(remove_password("redis://:pw@h:1"), "redis://h:1");
  EXPECT_EQ(remove_password("redis://alice:p:w@h:1/3"), "redis://alice@h:1/3");
  EXPECT_EQ(remove_password("rediss://alice:pw@h"), "rediss://alice@h");
  EXPECT_EQ(remove_password("redis://alice@h"), "redis://alice@h");
  EXPECT_EQ(remove_password("redis+cluster://:pw@h:1?seed=h:2"), "redis+cluster://h:1?seed=h:2");
  EXPECT_EQ(remove_password("rediss+sentinel://alice:pw@h:1/m"), "rediss+sentinel://alice@h:1/m");
  EXPECT_EQ(remove_password("unix:///tmp/a@b.sock"), "unix:///tmp/a@b.sock");
  EXPECT_FALSE(uri_has_password("redis://alice@h"));
  EXPECT_TRUE(uri_has_password("redis://:x@h"));
}

TEST(Secrets, MaskReplacesExactlyThePasswordsWithAFixedMask) {
  EXPECT_EQ(mask_passwords("redis://:one@a:1, redis://u:twotwotwo@b:2,redis://c:3"),
            "redis://:***@a:1, redis://u:***@b:2,redis://c:3");
  EXPECT_EQ(mask_passwords("--nodes=redis://:s@a:1"), "--nodes=redis://:***@a:1");
  EXPECT_EQ(mask_passwords("redis://a:1"), "redis://a:1");
  EXPECT_EQ(mask_passwords("redis://:@a:1"), "redis://:@a:1");  // an empty password hides nothing
}

// The arguments as the kernel lays them out: one after the other, each with its
// NUL, in one block (what /proc/PID/cmdline shows).
struct argv_block {
  std::string bytes;
  std::vector<char*> argv;
  explicit argv_block(const std::vector<std::string>& args) {
    for (const std::string& a : args) bytes.append(a).push_back('\0');
    std::size_t at = 0;
    for (const std::string& a : args) {
      argv.push_back(&bytes[at]);
      at += a.size() + 1;
    }
  }
  std::vector<std::string> args() const { return std::vector<std::string>(argv.begin(), argv.end()); }
};

// A mask as long as the password told its length to anyone running ps.
TEST(Secrets, ScrubArgvShowsTheSameMaskForPasswordsOfAnyLength) {
  for (const std::string& pw : std::vector<std::string>{"abc", "hunter2", std::string(40, 'x')}) {
    argv_block b(
        {"redlock", "run", "r", "--nodes", "redis://:" + pw + "@h:1,redis://u:" + pw + "@h:2", "--", "cmd"});
    const std::size_t size = b.bytes.size();
    scrub_argv(static_cast<int>(b.argv.size()), b.argv.data(), {4});
    EXPECT_EQ(b.args(), (std::vector<std::string>{"redlock", "run", "r", "--nodes",
                                                  "redis://:***@h:1,redis://u:***@h:2", "--", "cmd"}))
        << pw.size();
    ASSERT_EQ(b.bytes.size(), size);
    EXPECT_EQ(b.bytes.find(pw), std::string::npos);
    // The freed bytes are zeroes after the last argument.
    const std::size_t used =
        std::string("redlock run r --nodes redis://:***@h:1,redis://u:***@h:2 -- cmd ").size();
    EXPECT_EQ(b.bytes.find_first_not_of('\0', used), std::string::npos) << pw.size();
    EXPECT_EQ(b.argv[6], &b.bytes[used - 4]);
  }
}

TEST(Secrets, ScrubArgvUsesOneStarWhenTheMaskDoesNotFit) {
  argv_block b({"redlock", "--nodes=redis://:a@h:1", "acquire", "r"});
  scrub_argv(static_cast<int>(b.argv.size()), b.argv.data(), {1});
  EXPECT_EQ(b.args(), (std::vector<std::string>{"redlock", "--nodes=redis://:*@h:1", "acquire", "r"}));
  // Room from another, longer password: both get the mask.
  argv_block two({"redlock", "--nodes", "redis://:a@h:1", "--nodes", "redis://:abcdefg@h:1"});
  scrub_argv(static_cast<int>(two.argv.size()), two.argv.data(), {2, 4});
  EXPECT_EQ(two.args(), (std::vector<std::string>{"redlock", "--nodes", "redis://:***@h:1", "--nodes",
                                                  "redis://:***@h:1"}));
}

TEST(Secrets, ScrubArgvMasksArgumentsThatDoNotLieOneAfterTheOther) {
  std::string prog = "redlock", list = "redis://:secret@h:1", opt = "--nodes=redis://:a@h:2";
  std::vector<char*> argv = {prog.data(), list.data(), opt.data()};
  scrub_argv(3, argv.data(), {1, 2});
  EXPECT_EQ(std::string(argv[1]), "redis://:***@h:1");
  EXPECT_EQ(list.size(), std::string("redis://:secret@h:1").size());
  EXPECT_EQ(list.find_first_not_of('\0', std::strlen(argv[1])), std::string::npos);
  EXPECT_EQ(std::string(argv[2]), "--nodes=redis://:*@h:2");
}

TEST(Secrets, ScrubArgvLeavesOtherArgumentsAndArgv0Alone) {
  argv_block b({"redlock", "status", "r", "--nodes", "redis://h:1"});
  char* const argv0 = b.argv[0];
  const std::string before = b.bytes;
  scrub_argv(static_cast<int>(b.argv.size()), b.argv.data(), {4});
  EXPECT_EQ(b.bytes, before);
  scrub_argv(static_cast<int>(b.argv.size()), b.argv.data(), {0, 9});  // out of range: ignored
  EXPECT_EQ(b.bytes, before);
  EXPECT_EQ(b.argv[0], argv0);
}

class PasswordFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/redlock-pwfile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(PasswordFile, APrivateFileGivesItsContentWithOneNewlineStripped) {
  std::string pw, error;
  ASSERT_TRUE(read_password_file(write("a", "s3cret\n", 0600), pw, error)) << error;
  EXPECT_EQ(pw, "s3cret");
  ASSERT_TRUE(read_password_file(write("b", "two\n\n", 0400), pw, error)) << error;
  EXPECT_EQ(pw, "two\n");
  ASSERT_TRUE(read_password_file(write("c", "no-newline", 0600), pw, error)) << error;
  EXPECT_EQ(pw, "no-newline");
  ASSERT_TRUE(read_password_file(write("d", "crlf\r\n", 0600), pw, error)) << error;
  EXPECT_EQ(pw, "crlf");  // a file saved with a CRLF line ending
}

TEST_F(PasswordFile, IsRefusedWhenSharedEmptyMissingOrNotAFileNamingItButNotTheContent) {
  struct refusal {
    std::string path;
    const char* problem;
  };
  const std::vector<refusal> cases = {
      {write("world", "s3cret\n", 0644), "readable by others (mode 0644)"},
      {write("group", "s3cret\n", 0640), "readable by its group (mode 0640)"},
      {write("empty", "\n", 0600), "is empty"},
      {dir_ + "/missing", "cannot open"},
      {dir_, "not a regular file"},
  };
  for (const auto& c : cases) {
    std::string pw = "unchanged", error;
    EXPECT_FALSE(read_password_file(c.path, pw, error)) << c.path;
    EXPECT_NE(error.find("\"" + c.path + "\""), std::string::npos) << error;
    EXPECT_NE(error.find(c.problem), std::string::npos) << error;
    EXPECT_EQ(error.find("s3cret"), std::string::npos) << error;
    EXPECT_EQ(pw, "unchanged");
  }
}

TEST(Secrets, TokenFromAFileDescriptorIsOneLine) {
  const auto read_from = [](const std::string& content, std::string& token, std::string& error) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    const bool written = ::write(fds[1], content.data(), content.size()) == static_cast<ssize_t>(content.size());
    ::close(fds[1]);
    const bool ok = written && read_token(fds[0], token, error);
    ::close(fds[0]);
    return ok;
  };
  std::string token, error;
  ASSERT_TRUE(read_from("abc123\n", token, error)) << error;
  EXPECT_EQ(token, "abc123");
  ASSERT_TRUE(read_from("abc123\r\n", token, error)) << error;
  EXPECT_EQ(token, "abc123");
  EXPECT_FALSE(read_from("", token, error));
  EXPECT_NE(error.find("no token"), std::string::npos) << error;
  EXPECT_FALSE(read_from("a\nb\n", token, error));
  EXPECT_NE(error.find("more than one line"), std::string::npos) << error;
}

TEST(Tls, FlagsOverrideTheEnvironmentPerField) {
  environment e = env_with();
  e.tls_ca = "/env/ca.pem";
  e.tls_ca_dir = "/env/certs";
  e.tls_cert = "/env/cert.pem";
  e.tls_key = "/env/key.pem";
  e.tls_server_name = "env.example";
  const parse_result fromenv = parse_command_line({"status", "r"}, e);
  ASSERT_EQ(fromenv.what, kind::ok) << fromenv.error;
  EXPECT_EQ(fromenv.inv.tls.ca_file, "/env/ca.pem");
  EXPECT_EQ(fromenv.inv.tls.ca_dir, "/env/certs");
  EXPECT_EQ(fromenv.inv.tls.cert_file, "/env/cert.pem");
  EXPECT_EQ(fromenv.inv.tls.key_file, "/env/key.pem");
  EXPECT_EQ(fromenv.inv.tls.server_name, "env.example");
  EXPECT_FALSE(fromenv.inv.tls.insecure);
  EXPECT_TRUE(fromenv.warnings.empty());
  const parse_result flags =
      parse_command_line({"status", "r", "--tls-ca", "/f/ca.pem", "--tls-ca-dir=/f/certs", "--tls-cert",
                          "/f/c.pem", "--tls-key", "/f/k.pem", "--tls-server-name", "f.example"},
                         e);
  ASSERT_EQ(flags.what, kind::ok) << flags.error;
  EXPECT_EQ(flags.inv.tls.ca_file, "/f/ca.pem");
  EXPECT_EQ(flags.inv.tls.ca_dir, "/f/certs");
  EXPECT_EQ(flags.inv.tls.cert_file, "/f/c.pem");
  EXPECT_EQ(flags.inv.tls.key_file, "/f/k.pem");
  EXPECT_EQ(flags.inv.tls.server_name, "f.example");
  // A certificate from the environment and its key from a flag make a pair.
  environment half = env_with();
  half.tls_cert = "/env/cert.pem";
  EXPECT_EQ(parse_command_line({"status", "r", "--tls-key", "/f/k.pem"}, half).what, kind::ok);
  EXPECT_EQ(parse_command_line({"status", "r"}, half).what, kind::config_error);
}

TEST(Tls, InsecureFromTheFlagOrTheEnvironmentWarns) {
  const parse_result flag = parse({"status", "r", "--tls-insecure"});
  ASSERT_EQ(flag.what, kind::ok) << flag.error;
  EXPECT_TRUE(flag.inv.tls.insecure);
  EXPECT_EQ(flag.warnings.size(), 1u);
  EXPECT_TRUE(has_warning(flag, "not verified"));
  environment e = env_with();
  e.tls_insecure = "1";
  const parse_result env = parse_command_line({"status", "r"}, e);
  EXPECT_TRUE(env.inv.tls.insecure);
  EXPECT_TRUE(has_warning(env, "not verified"));
  e.tls_insecure = "0";
  EXPECT_FALSE(parse_command_line({"status", "r"}, e).inv.tls.insecure);
  e.tls_insecure = "yes";
  const parse_result bad = parse_command_line({"status", "r"}, e);
  EXPECT_EQ(bad.what, kind::config_error);
  EXPECT_NE(bad.error.find("REDLOCK_TLS_INSECURE"), std::string::npos) << bad.error;
}

TEST(Durations, ABareTtlBelowOneSecondWarnsOnce) {
  const parse_result bare = parse({"acquire", "r", "--ttl", "500"});
  ASSERT_EQ(bare.what, kind::ok) << bare.error;
  EXPECT_EQ(bare.inv.ttl, milliseconds(500));
  ASSERT_EQ(bare.warnings.size(), 1u);
  EXPECT_NE(bare.warnings[0].find("500ms"), std::string::npos) << bare.warnings[0];
  EXPECT_TRUE(parse({"acquire", "r", "--ttl", "500ms"}).warnings.empty());
  EXPECT_TRUE(parse({"acquire", "r", "--ttl", "1000"}).warnings.empty());
  EXPECT_TRUE(parse({"acquire", "r", "--ttl", "0.5s"}).warnings.empty());
  EXPECT_TRUE(parse({"acquire", "r", "--ttl", "20", "--ttl", "2s"}).warnings.empty());  // the last one counts
  EXPECT_EQ(parse({"acquire", "r", "--ttl", "1.5s"}).inv.ttl, milliseconds(1500));
  EXPECT_EQ(parse({"acquire", "r", "--ttl", "0.25m"}).inv.ttl, milliseconds(15'000));
}

TEST(Durations, ABareTtlBelowOneSecondIsRefusedByRunAndElectSuggestingSeconds) {
  const parse_result run = parse({"run", "r", "--ttl", "30", "--", "true"});
  ASSERT_EQ(run.what, kind::error);
  EXPECT_EQ(
      run.error,
      "--ttl 30 would be 30 milliseconds: did you mean 30s? (run refuses a bare --ttl below 1000; give the "
      "unit)");
  const parse_result elect = parse({"elect", "r", "--id", "a", "--ttl", "30", "--", "true"});
  ASSERT_EQ(elect.what, kind::error);
  EXPECT_NE(elect.error.find("did you mean 30s? (elect refuses"), std::string::npos) << elect.error;
  const parse_result b999 = parse({"run", "r", "--ttl", "999", "--", "true"});
  ASSERT_EQ(b999.what, kind::error);
  EXPECT_NE(b999.error.find("999s?"), std::string::npos) << b999.error;
  // A unit, or a bare number of 1000 or more, is taken as it is (the library
  // judges whether it leaves the watchdog time).
  for (const char* ttl : {"30ms", "500ms", "1000", "30s", "0.5s"}) {
    const parse_result ok = parse({"run", "r", "--ttl", ttl, "--", "true"});
    EXPECT_EQ(ok.what, kind::ok) << ttl << ": " << ok.error;
    EXPECT_TRUE(ok.warnings.empty()) << ttl;
  }
  EXPECT_EQ(parse({"run", "r", "--ttl", "30ms", "--", "true"}).inv.ttl, milliseconds(30));
  EXPECT_EQ(parse({"elect", "r", "--id", "a", "--ttl", "300ms", "--", "true"}).what, kind::ok);
  // The last --ttl counts.
  EXPECT_EQ(parse({"run", "r", "--ttl", "30", "--ttl", "30s", "--", "true"}).what, kind::ok);
  EXPECT_EQ(parse({"run", "r", "--ttl", "30s", "--ttl", "30", "--", "true"}).what, kind::error);
  // acquire, extend and bench keep a bare number as milliseconds, with a warning
  // that asks the same question.
  for (std::vector<std::string> args : {std::vector<std::string>{"acquire", "r", "--ttl", "30"},
                                        std::vector<std::string>{"extend", "r", "t", "--ttl", "30"},
                                        std::vector<std::string>{"bench", "--ttl", "30"}}) {
    const parse_result w = parse(args);
    ASSERT_EQ(w.what, kind::ok) << args[0] << ": " << w.error;
    EXPECT_EQ(w.inv.ttl, milliseconds(30)) << args[0];
    ASSERT_EQ(w.warnings.size(), 1u) << args[0];
    EXPECT_EQ(w.warnings[0],
              "--ttl 30 is 30 milliseconds; did you mean 30s? (write 30ms to say milliseconds)");
  }
  EXPECT_TRUE(parse({"acquire", "r", "--ttl", "30ms"}).warnings.empty());
}

TEST(CommandLine, WaitForeverIsAcceptedByAcquireRunAndElect) {
  const parse_result acq = parse({"acquire", "r", "--ttl", "1s", "--wait", "forever"});
  ASSERT_EQ(acq.what, kind::ok) << acq.error;
  EXPECT_TRUE(acq.inv.wait_forever);
  EXPECT_EQ(acq.inv.wait, milliseconds(0));
  const parse_result run = parse({"run", "r", "--ttl", "1s", "--wait=forever", "--", "true"});
  ASSERT_EQ(run.what, kind::ok) << run.error;
  EXPECT_TRUE(run.inv.wait_forever);
  const parse_result elect = parse({"elect", "r", "--id", "a", "--wait", "forever", "--", "true"});
  ASSERT_EQ(elect.what, kind::ok) << elect.error;
  EXPECT_TRUE(elect.inv.wait_forever);
  // Not waiting, or waiting for a duration, is as before; the last --wait wins.
  EXPECT_FALSE(parse({"acquire", "r", "--ttl", "1s"}).inv.wait_forever);
  const parse_result then_d = parse({"acquire", "r", "--ttl", "1s", "--wait", "forever", "--wait", "2s"});
  ASSERT_EQ(then_d.what, kind::ok) << then_d.error;
  EXPECT_FALSE(then_d.inv.wait_forever);
  EXPECT_EQ(then_d.inv.wait, milliseconds(2000));
  const parse_result then_f = parse({"acquire", "r", "--ttl", "1s", "--wait", "2s", "--wait", "forever"});
  EXPECT_TRUE(then_f.inv.wait_forever);
  EXPECT_EQ(then_f.inv.wait, milliseconds(0));
}

TEST(CommandLine, WaitRefusesOtherWordsAndElectTakesOnlyForever) {
  for (const char* bad : {"Forever", "FOREVER", "inf", "never", "forever ", "-1"}) {
    const parse_result r = parse({"acquire", "r", "--ttl", "1s", "--wait", bad});
    ASSERT_EQ(r.what, kind::error) << bad;
    EXPECT_EQ(r.error.rfind(std::string("--wait: bad duration \"") + bad + "\"", 0), 0u) << r.error;
    EXPECT_NE(r.error.find("use forever, or milliseconds"), std::string::npos) << r.error;
  }
  for (const char* d : {"2s", "0", "soon"}) {
    const parse_result r = parse({"elect", "r", "--id", "a", "--wait", d, "--", "true"});
    ASSERT_EQ(r.what, kind::error) << d;
    EXPECT_EQ(r.error,
              std::string("--wait: elect campaigns until elected or a signal; it takes only \"forever\", "
                          "not \"") +
                  d + "\"");
  }
  EXPECT_NE(parse({"status", "r", "--wait", "forever"}).error.find("--wait does not apply to status"),
            std::string::npos);
}

TEST(CommandLine, ConflictExitCodeIsAWholeNumberFrom0To255ForAcquireAndRun) {
  EXPECT_EQ(parse({"acquire", "r", "--ttl", "1s"}).inv.conflict_exit_code, 75);
  EXPECT_EQ(parse({"run", "r", "--ttl", "1s", "--", "true"}).inv.conflict_exit_code, 75);
  for (const auto& [text, value] :
       std::vector<std::pair<const char*, int>>{{"0", 0}, {"1", 1}, {"75", 75}, {"255", 255}, {"007", 7}}) {
    const parse_result a = parse({"acquire", "r", "--ttl", "1s", "--conflict-exit-code", text});
    ASSERT_EQ(a.what, kind::ok) << text << ": " << a.error;
    EXPECT_EQ(a.inv.conflict_exit_code, value) << text;
    const parse_result r =
        parse({"run", "r", "--ttl", "1s", std::string("--conflict-exit-code=") + text, "--", "x"});
    ASSERT_EQ(r.what, kind::ok) << text << ": " << r.error;
    EXPECT_EQ(r.inv.conflict_exit_code, value) << text;
  }
  for (const char* bad : {"256", "1000", "-1", "+1", "x", "", "1.5", "0x1", " 1", "99999999999999999999"}) {
    const parse_result r = parse({"acquire", "r", "--ttl", "1s", "--conflict-exit-code", bad});
    ASSERT_EQ(r.what, kind::error) << bad;
    EXPECT_EQ(r.error,
              std::string("--conflict-exit-code: \"") + bad + "\" is not a whole number from 0 to 255");
  }
  EXPECT_EQ(parse({"acquire", "r", "--ttl", "1s", "--conflict-exit-code"}).error,
            "option --conflict-exit-code needs a value");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"release", "r", "t", "--conflict-exit-code", "0"},
        std::vector<std::string>{"elect", "r", "--id", "a", "--conflict-exit-code", "0", "--", "true"},
        std::vector<std::string>{"status", "r", "--conflict-exit-code", "0"}}) {
    const parse_result r = parse(args);
    EXPECT_EQ(r.what, kind::error) << args[0];
    EXPECT_EQ(r.error, "option --conflict-exit-code does not apply to " + args[0]);
  }
}

TEST(HelpTables, TheHelpNamesWaitForeverTheConflictExitCodeAndWhatQuietSilences) {
  const std::string help = help_text();
  for (const char* words : {"[--wait D|forever]", "--wait forever: until acquired or a signal",
                            "[--wait forever]", "--conflict-exit-code N", "instead of 75",
                            "no error when the lock is held elsewhere", "(other errors are still printed)"}) {
    EXPECT_NE(help.find(words), std::string::npos) << words;
  }
  for (command c : {command::acquire, command::run}) {
    EXPECT_NE(help_text(c).find("--conflict-exit-code N"), std::string::npos) << to_string(c);
  }
  EXPECT_EQ(help_text(command::elect).find("--conflict-exit-code"), std::string::npos);
  EXPECT_NE(help_text(command::elect).find("--wait D"), std::string::npos);
}

// --- signals: which are forwarded, which absorbed ---

TEST(Signals, RunForwardsExactlyTheDocumentedSignals) {
  EXPECT_EQ(forwarded_signals(),
            (std::vector<int>{SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH}));
  for (int s : {SIGHUP, SIGINT, SIGTERM, SIGQUIT}) EXPECT_TRUE(is_terminating(s)) << s;
  for (int s : {SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM, SIGCHLD}) EXPECT_FALSE(is_terminating(s)) << s;
}

TEST(Signals, EverySignalThatWouldEndTheToolButSigkillIsCaught) {
  // The signals whose default action is not to end the process (ignore, stop,
  // continue), SIGKILL, which cannot be caught, and SIGPIPE, which main() ignores.
  const std::vector<int> harmless = {SIGCHLD, SIGCONT, SIGSTOP,  SIGTSTP, SIGTTIN,
                                     SIGTTOU, SIGURG,  SIGWINCH, SIGKILL, SIGPIPE};
  const std::vector<int> caught = guarded_signals({SIGCHLD});
  for (int s = 1; s <= SIGRTMAX; ++s) {
    if (s > 31 && s < SIGRTMIN) continue;  // reserved by the C library's threads
    const bool listed = std::find(caught.begin(), caught.end(), s) != caught.end();
    const bool exempt = std::find(harmless.begin(), harmless.end(), s) != harmless.end();
    EXPECT_TRUE(listed || exempt) << "signal " << s << " (" << strsignal(s) << ") would end redlock run";
    if (s == SIGKILL || s == SIGSTOP || s == SIGPIPE) {
      EXPECT_FALSE(listed) << s;
    }
  }
  // No signal is both forwarded and absorbed.
  for (int s : absorbed_signals()) {
    EXPECT_EQ(std::count(forwarded_signals().begin(), forwarded_signals().end(), s), 0) << s;
  }
}

// Runs `body` in a child process and returns its wait status, or -1 if it was
// still running after 10 s (then it is killed).
int wait_status_of_child(void (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  for (int i = 0; i < 1000; ++i) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    ::usleep(10'000);
  }
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return -1;
}

TEST(Signals, ASegvSentByAnotherProcessIsPostedButAFaultOfOurOwnStillEndsTheProcess) {
  // kill(2) from a process: posted to the pipe, the process lives on (exit 0).
  const int sent = wait_status_of_child([] {
    event_pipe pipe;
    signal_capture capture(pipe, absorbed_signals());
    ::kill(::getpid(), SIGSEGV);
    ::kill(::getpid(), SIGABRT);
    const std::optional<event> e1 = pipe.wait(std::chrono::milliseconds(5000));
    const std::optional<event> e2 = pipe.wait(std::chrono::milliseconds(5000));
    ::_exit(e1 && e1->type == SIGSEGV && e2 && e2->type == SIGABRT ? 0 : 3);
  });
  ASSERT_NE(sent, -1) << "the child did not finish";
  EXPECT_TRUE(WIFEXITED(sent) && WEXITSTATUS(sent) == 0) << sent;
  // A real fault: the previous action (here the default) takes over, the process
  // does not spin re-running the faulting instruction.
  const int fault = wait_status_of_child([] {
    event_pipe pipe;
    signal_capture capture(pipe, absorbed_signals());
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;
  });
  ASSERT_NE(fault, -1) << "a fault of the process's own must end it, not loop";
  // Under a sanitizer its own handler reports and exits non-zero instead.
  EXPECT_TRUE((WIFSIGNALED(fault) && WTERMSIG(fault) == SIGSEGV) ||
              (WIFEXITED(fault) && WEXITSTATUS(fault) != 0))
      << fault;
  // abort() still ends it.
  const int aborted = wait_status_of_child([] {
    event_pipe pipe;
    signal_capture capture(pipe, absorbed_signals());
    std::abort();
  });
  ASSERT_NE(aborted, -1);
  EXPECT_TRUE(WIFSIGNALED(aborted) && WTERMSIG(aborted) == SIGABRT) << aborted;
}

// --- help, man page, completion: one table ---

TEST(HelpTables, EveryOptionIsInTheHelpTheManPageAndTheCompletion) {
  const std::string help = help_text();
  const std::string man = man_page("9.9.9");
  const std::string bash = bash_completion();
  const auto roff = [](std::string s) {
    std::string out;
    for (char c : s) out += c == '-' ? std::string("\\-") : std::string(1, c);
    return out;
  };
  for (const auto& o : option_docs()) {
    EXPECT_NE(help.find(o.name), std::string::npos) << o.name;
    EXPECT_NE(man.find("\\fB" + roff(o.name) + "\\fR"), std::string::npos) << o.name;
    if (std::string(o.name) != "--help") {
      EXPECT_NE(bash.find(std::string(" ") + o.name), std::string::npos) << o.name;
    }
  }
  for (const auto& c : command_docs()) {
    EXPECT_NE(man.find(std::string(".B ") + c.name), std::string::npos) << c.name;
    EXPECT_NE(bash.find(std::string("    ") + c.name + ") opts="), std::string::npos) << c.name;
  }
  EXPECT_NE(man.find("redlock 9.9.9"), std::string::npos);
}

// The text of `script` from the line "    NAME)" to its ";;" (zsh's case branch of
// a command).
std::string zsh_branch(const std::string& script, const std::string& name) {
  const std::size_t b = script.find("\n    " + name + ")\n");
  if (b == std::string::npos) return {};
  return script.substr(b, script.find(";;", b) - b);
}

// Whether the zsh branch offers option `o`: "'--ttl=[", "'--json[" or "{-q,--quiet}".
bool zsh_offers(const std::string& branch, const option_doc& o) {
  const std::string name = o.name;
  return branch.find("'" + name + "[") != std::string::npos || branch.find("'" + name + "=[") != std::string::npos ||
         (o.short_name != nullptr && branch.find("{" + std::string(o.short_name) + "," + name + "}") != std::string::npos);
}

// The commands fish offers option `o` for: the names in the condition of its line
// "complete -c redlock -n '__fish_seen_subcommand_from CMDS' [-s S] -l NAME ...".
std::vector<std::string> fish_commands_of(const std::string& script, const option_doc& o) {
  std::istringstream lines(script);
  const std::string head = "complete -c redlock -n '__fish_seen_subcommand_from ";
  std::string flag = " -l " + std::string(o.name + 2) + " ";
  if (o.short_name != nullptr) flag = " -s " + std::string(o.short_name + 1) + flag;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(head, 0) != 0) continue;
    const std::size_t close = line.find('\'', head.size());
    if (close == std::string::npos || line.compare(close + 1, flag.size(), flag) != 0) continue;
    std::vector<std::string> cmds;
    std::istringstream words(line.substr(head.size(), close - head.size()));
    for (std::string w; words >> w;) cmds.push_back(w);
    return cmds;
  }
  return {};
}

TEST(HelpTables, TheZshAndFishCompletionsOfferEachCommandExactlyItsOptions) {
  const std::string zsh = zsh_completion(), fish = fish_completion();
  EXPECT_EQ(zsh.rfind("#compdef redlock\n", 0), 0u) << zsh;
  for (const auto& c : command_docs()) {
    const std::string branch = zsh_branch(zsh, c.name);
    ASSERT_FALSE(branch.empty()) << c.name;
    EXPECT_NE(zsh.find("    '" + std::string(c.name) + ":"), std::string::npos) << c.name;
    EXPECT_NE(fish.find(" -a " + std::string(c.name) + " -d '"), std::string::npos) << c.name;
    for (const auto& o : option_docs()) {
      const bool takes = (o.commands & command_bit(c.cmd)) != 0;
      EXPECT_EQ(zsh_offers(branch, o), takes) << "zsh, " << c.name << ": " << o.name;
      const std::vector<std::string> cmds = fish_commands_of(fish, o);
      EXPECT_EQ(std::find(cmds.begin(), cmds.end(), c.name) != cmds.end(), takes) << "fish, " << c.name << ": " << o.name;
    }
  }
}

// Runs `shell -n` on `script`: 0 when its syntax is sound. zsh and fish come with
// tools/deps.sh, so the check always runs.
int syntax_check(const std::string& shell, const std::string& script) {
  char path[] = "/tmp/redlock-completion-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  const bool written = ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  const int rc = written ? std::system((shell + " -n '" + path + "'").c_str()) : -1;
  ::unlink(path);
  return rc;
}

TEST(HelpTables, TheZshAndFishCompletionsPassTheirShellsSyntaxCheck) {
  ASSERT_EQ(std::system("command -v zsh >/dev/null && command -v fish >/dev/null"), 0)
      << "zsh and fish are missing: run tools/deps.sh";
  EXPECT_EQ(syntax_check("zsh", zsh_completion()), 0);
  EXPECT_EQ(syntax_check("fish", fish_completion()), 0);
  // The checks can fail: an unclosed quote is refused.
  EXPECT_NE(syntax_check("zsh 2>/dev/null", zsh_completion() + "'\n"), 0);
  EXPECT_NE(syntax_check("fish 2>/dev/null", fish_completion() + "'\n"), 0);
}

TEST(HelpTables, TheManPageHasExamplesAndSendsNoReaderToAnUninstalledFile) {
  const std::string man = man_page("9.9.9");
  const std::size_t examples = man.find("\n.SH EXAMPLES\n");
  ASSERT_NE(examples, std::string::npos);
  EXPECT_NE(man.find("\\-\\-conflict\\-exit\\-code 0 \\-q \\-\\-password\\-file", examples), std::string::npos);
  EXPECT_NE(man.find("EnvironmentFile=", examples), std::string::npos);
  EXPECT_EQ(man.find("docs/"), std::string::npos) << "docs/ is not installed";
}

TEST(HelpTables, ACommandsHelpListsItsOwnOptionsOnly) {
  const std::string run = help_text(command::run);
  EXPECT_EQ(run.rfind("Usage: redlock run RESOURCE", 0), 0u) << run;
  for (const char* own : {"--ttl D", "--wait D", "--retry-delay D", "--fencing", "--kill-after D"}) {
    EXPECT_NE(run.find(own), std::string::npos) << own;
  }
  for (const char* other : {"--clients", "--token TOKEN", "--nodes URI", "--tls-ca FILE"}) {
    EXPECT_EQ(run.find(other), std::string::npos) << other;
  }
  EXPECT_NE(run.find("redlock --help"), std::string::npos) << "points to the global options";
  const std::string release = help_text(command::release);
  EXPECT_NE(release.find("--token TOKEN"), std::string::npos) << release;
  EXPECT_EQ(release.find("--ttl"), std::string::npos) << release;
}

}  // namespace
}  // namespace redlock::cli

// --- monitor: options, the RTT window, HTTP heads, the renderings ---

namespace redlock::cli {
namespace {

TEST(MonitorArgs, defaults_and_options) {
  parse_result r = parse_command_line({"monitor"}, "redis://a:1");
  ASSERT_EQ(r.what, parse_result::kind::ok) << r.error;
  EXPECT_EQ(r.inv.cmd, command::monitor);
  EXPECT_EQ(r.inv.interval, std::chrono::seconds(1));
  EXPECT_EQ(r.inv.count, 0);
  EXPECT_EQ(r.inv.prometheus, "");
  EXPECT_EQ(r.inv.http_head_timeout, std::chrono::seconds(5));
  r = parse_command_line({"monitor", "--interval", "250ms", "--count", "3", "--json", "--prometheus",
                          "127.0.0.1:0", "--http-head-timeout", "1s"},
                         "redis://a:1");
  ASSERT_EQ(r.what, parse_result::kind::ok) << r.error;
  EXPECT_EQ(r.inv.interval, std::chrono::milliseconds(250));
  EXPECT_EQ(r.inv.count, 3);
  EXPECT_TRUE(r.inv.json);
  EXPECT_EQ(r.inv.prometheus, "127.0.0.1:0");
  EXPECT_EQ(r.inv.http_head_timeout, std::chrono::seconds(1));
  EXPECT_EQ(parse_command_line({"monitor", "res"}, "redis://a:1").what, parse_result::kind::error);
  EXPECT_EQ(parse_command_line({"monitor", "--count", "0"}, "redis://a:1").what, parse_result::kind::error);
  EXPECT_EQ(parse_command_line({"monitor", "--interval", "0"}, "redis://a:1").what, parse_result::kind::error);
  EXPECT_EQ(parse_command_line({"status", "r", "--interval", "1s"}, "redis://a:1").what,
            parse_result::kind::error);
  for (const char* bad : {"localhost:9464", "127.0.0.1", "127.0.0.1:70000", "127.0.0.1:", ":9464", "[::1:9"}) {
    EXPECT_EQ(parse_command_line({"monitor", "--prometheus", bad}, "redis://a:1").what, parse_result::kind::error)
        << bad;
  }
  EXPECT_EQ(parse_command_line({"monitor", "--prometheus", "[::1]:9464"}, "redis://a:1").what,
            parse_result::kind::ok);
}

TEST(MonitorArgs, split_listen_address) {
  std::string host, error;
  int port = -1;
  ASSERT_TRUE(split_listen_address("127.0.0.1:9464", host, port, error)) << error;
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9464);
  ASSERT_TRUE(split_listen_address("[::1]:0", host, port, error)) << error;
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  EXPECT_FALSE(split_listen_address("example.com:80", host, port, error));
  EXPECT_NE(error.find("numeric"), std::string::npos) << error;
}

TEST(RttWindow, nearest_rank_percentiles_over_the_last_n_values) {
  rtt_window w(10);
  EXPECT_FALSE(w.percentile(50));
  for (std::uint64_t v = 1; v <= 10; ++v) w.add(v * 100);
  EXPECT_EQ(w.percentile(50), 500u);
  EXPECT_EQ(w.percentile(99), 1000u);
  EXPECT_EQ(w.percentile(10), 100u);
  // Sliding: five new large values replace the five oldest.
  for (int i = 0; i < 5; ++i) w.add(10'000);
  EXPECT_EQ(w.size(), 10u);
  EXPECT_EQ(w.percentile(50), 1000u);  // 600..1000 and five 10000s
  EXPECT_EQ(w.percentile(99), 10'000u);
  rtt_window one(1);
  one.add(7);
  one.add(9);
  EXPECT_EQ(one.percentile(50), 9u);
}

TEST(RttWindow, counts_and_sums_every_value_beyond_the_window) {
  rtt_window w(2);
  EXPECT_EQ(w.total_count(), 0u);
  EXPECT_EQ(w.total_us(), 0u);
  for (std::uint64_t v : {100, 200, 300, 400}) w.add(v);
  EXPECT_EQ(w.size(), 2u);
  EXPECT_EQ(w.total_count(), 4u);
  EXPECT_EQ(w.total_us(), 1000u);
}

TEST(HttpHead, incomplete_complete_bad_and_too_large) {
  EXPECT_EQ(parse_http_head("GET /metrics HTTP/1.1\r\nHost: x\r\n").st, http_head::state::incomplete);
  const http_head h = parse_http_head("GET /metrics?a=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(h.st, http_head::state::complete);
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/metrics?a=1");
  EXPECT_EQ(parse_http_head("POST /x HTTP/1.0\n\n").st, http_head::state::complete);
  EXPECT_EQ(parse_http_head("garbage\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("GET /metrics SPDY/3\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("get /metrics HTTP/1.1\r\n\r\n").st, http_head::state::bad);
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(max_http_head, 'a');
  EXPECT_EQ(parse_http_head(big).st, http_head::state::too_large);
  EXPECT_EQ(parse_http_head(big + "\r\n\r\n").st, http_head::state::too_large);  // ends past the cap
  const std::string fits = "GET / HTTP/1.1\r\nX: " + std::string(max_http_head - 23, 'a') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), max_http_head);
  EXPECT_EQ(parse_http_head(fits).st, http_head::state::complete);
}

TEST(HttpHead, a_head_ends_at_the_first_empty_line_with_or_without_its_cr) {
  // Each line ends in LF, a CR before it optional (RFC 9112 2.2), so every mix of
  // the two ends the head: "\n\r\n" once waited for more bytes until the timeout.
  for (const char* req : {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "GET /metrics HTTP/1.1\nHost: x\n\n",
                          "GET /metrics HTTP/1.1\nHost: x\n\r\n", "GET /metrics HTTP/1.1\r\nHost: x\r\n\n",
                          "GET /metrics HTTP/1.1\n\r\n"}) {
    const http_head h = parse_http_head(req);
    EXPECT_EQ(h.st, http_head::state::complete) << req;
    EXPECT_EQ(h.target, "/metrics") << req;
  }
  EXPECT_EQ(http_head_length("GET / HTTP/1.1\nA: b\n\r\nrest"), 22u);
  EXPECT_EQ(http_head_length("GET / HTTP/1.1\r\n\r\r\n"), std::string_view::npos);  // "\r\r" is not empty
  EXPECT_EQ(parse_http_head("GET / HTTP/1.1\r\n\r\r\n").st, http_head::state::incomplete);
}

TEST(HttpHead, a_request_line_is_method_target_and_http_1_digit) {
  EXPECT_EQ(parse_http_head("GET /metrics HTTP/1.0\r\n\r\n").st, http_head::state::complete);
  EXPECT_EQ(parse_http_head("GET /metrics HTTP/1.1x\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("GET /metrics HTTP/1.\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("GET /met\rrics HTTP/1.1\r\n\r\n").st, http_head::state::bad);  // a bare CR
  EXPECT_EQ(parse_http_head("GET /met\x01rics HTTP/1.1\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("GET /m\xc3\xa9trics HTTP/1.1\r\n\r\n").st, http_head::state::bad);
  EXPECT_EQ(parse_http_head("GET  /metrics HTTP/1.1\r\n\r\n").st, http_head::state::bad);
}

TEST(HttpHead, routing_gives_200_405_404_431_400) {
  const auto body = [] { return std::string("m 1\n"); };
  const auto route = [&](const std::string& req) {
    return http_route(parse_http_head(req), "/metrics", "text/plain; version=0.0.4", body);
  };
  const std::string ok = route("GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ok,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: 4\r\n"
            "Connection: close\r\n\r\nm 1\n");
  EXPECT_EQ(route("POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u);
  EXPECT_NE(route("POST /metrics HTTP/1.1\r\n\r\n").find("\r\nAllow: GET\r\n"), std::string::npos);
  EXPECT_EQ(route("GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u);
  EXPECT_EQ(route("GET /metricsx HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(route("nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(route("GET / HTTP/1.1\r\nX: " + std::string(max_http_head, 'a')).rfind("HTTP/1.1 431", 0), 0u);
}

monitor_sample sample() {
  monitor_sample s;
  s.unix_ms = 1'796'131'200'123;  // 2026-12-01T13:20:00.123Z
  s.seq = 2;
  s.quorum = 2;
  s.reachable = 1;
  s.voting = 1;
  s.quorum_ok = false;
  s.lock_error = "acquire: unavailable";
  monitor_node a;
  a.node = "redis://127.0.0.1:7001";
  a.status = "ok";
  a.reachable = true;
  a.rtt_us = 120;
  a.rtt_p50_us = 110;
  a.rtt_p99_us = 300;
  a.run_id = "abc";
  a.uptime_s = 42;
  a.redis_version = "7.0.15";
  a.maxmemory_policy = "noeviction";
  a.aof_enabled = false;
  a.rtt_count = 7;
  a.rtt_sum_us = 1'500;
  monitor_node b;
  b.node = "redis://127.0.0.1:7002";
  b.status = "timeout";
  b.detail = "no reply within 50 ms";
  s.nodes = {a, b};
  s.warnings = {"a \"warning\""};
  return s;
}

TEST(MonitorView, json_line_has_the_documented_fields) {
  EXPECT_EQ(monitor_json_line(sample()),
            "{\"time\":\"2026-12-01T13:20:00.123Z\",\"seq\":2,\"quorum_ok\":false,\"quorum\":2,\"reachable\":1,"
            "\"voting\":1,\"lock_pair_us\":null,\"lock_error\":\"acquire: unavailable\",\"nodes\":["
            "{\"node\":\"redis://127.0.0.1:7001\",\"reachable\":true,\"status\":\"ok\",\"detail\":null,"
            "\"rtt_us\":120,\"rtt_p50_us\":110,\"rtt_p99_us\":300,\"quarantined\":false,\"quarantine_detail\":null,"
            "\"quarantine_left_ms\":null,\"run_id\":\"abc\",\"uptime_s\":42,\"redis_version\":\"7.0.15\","
            "\"maxmemory_policy\":\"noeviction\",\"aof_enabled\":false},"
            "{\"node\":\"redis://127.0.0.1:7002\",\"reachable\":false,\"status\":\"timeout\","
            "\"detail\":\"no reply within 50 ms\",\"rtt_us\":null,\"rtt_p50_us\":null,\"rtt_p99_us\":null,"
            "\"quarantined\":false,\"quarantine_detail\":null,\"quarantine_left_ms\":null,\"run_id\":null,"
            "\"uptime_s\":null,\"redis_version\":null,\"maxmemory_policy\":null,\"aof_enabled\":null}],"
            "\"warnings\":[\"a \\\"warning\\\"\"]}\n");
}

// A cluster or Sentinel node's line gains its members and when its master changed;
// a plain node's line is as before.
TEST(MonitorView, a_deployment_node_lists_its_members_in_json_and_on_the_screen) {
  monitor_sample s = sample();
  monitor_node& n = s.nodes[0];
  n.node = "redis+sentinel://127.0.0.1:26379/main";
  n.members = {monitor_member{"master", "127.0.0.1:7003", true, 1, 0},
               monitor_member{"sentinel", "127.0.0.1:26379", false, -1, 0}};
  n.master_changed_ms_ago = 1500;
  const std::string line = monitor_json_line(s);
  EXPECT_NE(line.find("\"aof_enabled\":false,\"members\":[{\"role\":\"master\",\"address\":\"127.0.0.1:7003\","
                      "\"connected\":true,\"replicas\":1,\"slots\":0},{\"role\":\"sentinel\",\"address\":"
                      "\"127.0.0.1:26379\",\"connected\":false,\"replicas\":null,\"slots\":0}],"
                      "\"master_changed_ms_ago\":1500}"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("\"aof_enabled\":null}]"), std::string::npos) << "the plain node has no members field: " << line;
  const std::string screen = monitor_screen(s, std::chrono::seconds(1));
  EXPECT_NE(screen.find("  master 127.0.0.1:7003"), std::string::npos) << screen;
  EXPECT_NE(screen.find("1 replica"), std::string::npos) << screen;
  EXPECT_NE(screen.find("  sentinel 127.0.0.1:26379"), std::string::npos) << screen;
  EXPECT_NE(screen.find("master changed 1.50s ago"), std::string::npos) << screen;
}

// The members as Prometheus series: a label per member (bounded), for deployment
// nodes only; a cluster's shard masters also give their slots.
TEST(MonitorView, a_deployment_nodes_members_are_series_with_a_member_label) {
  monitor_sample s = sample();
  s.nodes[0].node = "redis+sentinel://127.0.0.1:26379/main";
  s.nodes[0].members = {monitor_member{"master", "127.0.0.1:7003", true, 1, 0},
                        monitor_member{"sentinel", "127.0.0.1:26379", false, -1, 0}};
  s.nodes[0].master_changed_ms_ago = 1500;
  s.nodes[1].node = "redis+cluster://127.0.0.1:7010";
  s.nodes[1].members = {monitor_member{"shard master", "127.0.0.1:7010", true, 0, 16384}};
  const std::string prom = monitor_prometheus(&s, 2);
  const std::string sen = "node=\"redis+sentinel://127.0.0.1:26379/main\"";
  EXPECT_NE(prom.find("\nredlock_monitor_member_up{" + sen + ",member=\"127.0.0.1:7003\",role=\"master\"} 1\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_member_up{" + sen + ",member=\"127.0.0.1:26379\",role=\"sentinel\"} 0\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_member_replicas{" + sen + ",member=\"127.0.0.1:7003\",role=\"master\"} 1\n"),
            std::string::npos)
      << prom;
  EXPECT_EQ(prom.find("redlock_monitor_member_replicas{" + sen + ",member=\"127.0.0.1:26379\""), std::string::npos)
      << "a sentinel has no replicas: " << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_member_slots{node=\"redis+cluster://127.0.0.1:7010\",member=\"127.0.0.1:7010\","
                      "role=\"shard master\"} 16384\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_node_master_changed_seconds{" + sen + "} 1.500000\n"), std::string::npos) << prom;
  EXPECT_EQ(prom.find("redlock_monitor_node_master_changed_seconds{node=\"redis+cluster"), std::string::npos) << prom;
  // Bounded: at most 64 members of one node become series.
  for (int i = 0; i < 100; ++i) {
    s.nodes[1].members.push_back(monitor_member{"shard master", "127.0.0.1:" + std::to_string(8000 + i), true, 0, 1});
  }
  const std::string many = monitor_prometheus(&s, 2);
  std::size_t series = 0;
  for (std::size_t at = many.find("\nredlock_monitor_member_up{node=\"redis+cluster"); at != std::string::npos;
       at = many.find("\nredlock_monitor_member_up{node=\"redis+cluster", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 64u);
  // A quorum of plain nodes exports none of these families.
  const monitor_sample plain_nodes = sample();
  const std::string plain = monitor_prometheus(&plain_nodes, 2);
  for (const char* f : {"redlock_monitor_member_up", "redlock_monitor_member_replicas", "redlock_monitor_member_slots",
                        "redlock_monitor_node_master_changed_seconds"}) {
    EXPECT_EQ(plain.find(f), std::string::npos) << f;
  }
}

TEST(MonitorView, text_line_screen_and_prometheus) {
  const monitor_sample s = sample();
  EXPECT_EQ(monitor_text_line(s),
            "2026-12-01T13:20:00.123Z NO QUORUM (1/2 voting, need 2) lock FAILED | redis://127.0.0.1:7001 up "
            "p50 110us p99 300us | redis://127.0.0.1:7002 DOWN(timeout) | warnings 1\n");
  const std::string screen = monitor_screen(s, std::chrono::seconds(1));
  EXPECT_EQ(screen.rfind("\x1b[H\x1b[2J", 0), 0u);
  EXPECT_NE(screen.find("redis://127.0.0.1:7002 DOWN(timeout)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("42s"), std::string::npos) << screen;
  const std::string prom = monitor_prometheus(&s, 2);
  EXPECT_NE(prom.find("\nredlock_monitor_intervals_total 2\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_node_up{node=\"redis://127.0.0.1:7001\"} 1\n"), std::string::npos);
  EXPECT_NE(prom.find("\nredlock_monitor_node_up{node=\"redis://127.0.0.1:7002\"} 0\n"), std::string::npos);
  // The round trip is a summary (promtool check metrics refuses a gauge with a quantile label).
  EXPECT_NE(prom.find("\n# TYPE redlock_monitor_node_rtt_seconds summary\n"
                      "redlock_monitor_node_rtt_seconds{node=\"redis://127.0.0.1:7001\",quantile=\"0.5\"} 0.000110\n"
                      "redlock_monitor_node_rtt_seconds{node=\"redis://127.0.0.1:7001\",quantile=\"0.99\"} 0.000300\n"
                      "redlock_monitor_node_rtt_seconds_sum{node=\"redis://127.0.0.1:7001\"} 0.001500\n"
                      "redlock_monitor_node_rtt_seconds_count{node=\"redis://127.0.0.1:7001\"} 7\n"
                      "redlock_monitor_node_rtt_seconds_sum{node=\"redis://127.0.0.1:7002\"} 0.000000\n"
                      "redlock_monitor_node_rtt_seconds_count{node=\"redis://127.0.0.1:7002\"} 0\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_quorum 2\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("\nredlock_monitor_voting_nodes 1\n"), std::string::npos) << prom;
  // Eviction risk: known for the node whose policy was read, absent for the other.
  EXPECT_NE(prom.find("\nredlock_monitor_node_eviction_risk{node=\"redis://127.0.0.1:7001\"} 0\n"), std::string::npos)
      << prom;
  EXPECT_EQ(prom.find("redlock_monitor_node_eviction_risk{node=\"redis://127.0.0.1:7002\"}"), std::string::npos)
      << prom;
  monitor_sample evicting = s;
  evicting.nodes[0].maxmemory_policy = "allkeys-lru";
  evicting.nodes[0].eviction_risk = true;
  EXPECT_NE(monitor_prometheus(&evicting, 2)
                .find("\nredlock_monitor_node_eviction_risk{node=\"redis://127.0.0.1:7001\"} 1\n"),
            std::string::npos);
  // The two "node up" families say whose view they are.
  EXPECT_NE(prom.find("# HELP redlock_monitor_node_up Monitor probe: "), std::string::npos) << prom;
  EXPECT_NE(prom.find("is redlock_node_up."), std::string::npos) << prom;
  EXPECT_EQ(prom.find("\nredlock_monitor_lock_pair_seconds "), std::string::npos);  // the lock failed
  EXPECT_EQ(monitor_prometheus(nullptr, 0),
            "# HELP redlock_monitor_intervals_total Probe intervals completed by redlock monitor.\n"
            "# TYPE redlock_monitor_intervals_total counter\nredlock_monitor_intervals_total 0\n");
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(format_uptime(3725), "1h02m");
  EXPECT_EQ(format_uptime(90'000), "1d01h");
  EXPECT_EQ(format_us(1250), "1.25ms");
  EXPECT_EQ(counted(1, "node"), "1 node");
  EXPECT_EQ(counted(0, "node"), "0 nodes");
  EXPECT_EQ(counted(3, "client"), "3 clients");
}

TEST(ElectArgs, elect_needs_an_id_and_a_command_and_defaults_its_ttl) {
  const char* one_node = "redis://127.0.0.1:7001";
  parse_result r = parse_command_line({"elect", "job", "--id", "h:1", "--", "true"}, one_node);
  ASSERT_EQ(r.what, parse_result::kind::ok) << r.error;
  EXPECT_EQ(r.inv.cmd, command::elect);
  EXPECT_EQ(r.inv.resource, "job");
  EXPECT_EQ(r.inv.identity, "h:1");
  EXPECT_EQ(r.inv.ttl, default_elect_ttl);
  EXPECT_EQ(r.inv.argv, std::vector<std::string>{"true"});
  r = parse_command_line({"elect", "job", "--id", "h:1", "--ttl", "3s", "--retry-delay", "50ms", "--kill-after",
                          "1s", "--", "true"},
                         one_node);
  ASSERT_EQ(r.what, parse_result::kind::ok) << r.error;
  EXPECT_EQ(r.inv.ttl, std::chrono::seconds(3));
  EXPECT_EQ(r.inv.retry_delay, std::chrono::milliseconds(50));
  EXPECT_EQ(r.inv.kill_after, std::chrono::seconds(1));
  r = parse_command_line({"elect", "job", "--", "true"}, one_node);
  EXPECT_EQ(r.what, parse_result::kind::error);
  EXPECT_EQ(r.error, "elect needs --id ID");
  r = parse_command_line({"elect", "job", "--id", "h:1"}, one_node);
  EXPECT_EQ(r.what, parse_result::kind::error);
  EXPECT_EQ(r.error, "elect needs a command after \"--\"");
  r = parse_command_line({"elect", "job", "--id", "", "--", "true"}, one_node);
  EXPECT_EQ(r.what, parse_result::kind::error);
  EXPECT_EQ(r.error, "--id must be 1 to 512 bytes");
  r = parse_command_line({"elect", "job", "--id", "h:1", "--fencing", "--", "true"}, one_node);
  EXPECT_EQ(r.what, parse_result::kind::error);  // always fenced: the term
  r = parse_command_line({"elect", "", "--id", "h:1", "--", "true"}, one_node);
  EXPECT_EQ(r.error, "ROLE must not be empty");
}

TEST(ElectArgs, leader_takes_a_role_and_no_command) {
  const char* one_node = "redis://127.0.0.1:7001";
  parse_result r = parse_command_line({"leader", "job", "--json"}, one_node);
  ASSERT_EQ(r.what, parse_result::kind::ok) << r.error;
  EXPECT_EQ(r.inv.cmd, command::leader);
  EXPECT_EQ(r.inv.resource, "job");
  EXPECT_TRUE(r.inv.json);
  EXPECT_EQ(parse_command_line({"leader"}, one_node).error, "leader needs ROLE");
  EXPECT_EQ(parse_command_line({"leader", "job", "--", "x"}, one_node).error, "leader takes no \"--\"");
  EXPECT_EQ(parse_command_line({"leader", "job", "--id", "x"}, one_node).error, "option --id does not apply to leader");
}


// --- the readers of docs/monitoring/ (monitoring_files.h), used by cli_test ---

using names = std::set<std::string>;

TEST(MonitoringFiles, promql_metric_names_skip_functions_matchers_clauses_and_variables) {
  using test::monitoring::promql_metric_names;
  EXPECT_EQ(promql_metric_names(R"(sum by (job, instance) (rate(redlock_operations_total{op="acquire",)"
                                R"(outcome!~"ok|contended"}[5m])))"),
            names({"redlock_operations_total"}));
  EXPECT_EQ(promql_metric_names("histogram_quantile(0.99, sum by (node, le) "
                                "(rate(redlock_node_rtt_seconds_bucket{job=~\"$job\"}[$__rate_interval])))"),
            names({"redlock_node_rtt_seconds_bucket"}));
  EXPECT_EQ(promql_metric_names("a * on (job, node) group_left(reason) (1 - max by (node) (b)) offset 5m"),
            names({"a", "b"}));
  EXPECT_EQ(promql_metric_names("sum(x) without (instance) / count(y) by (job) > bool 1e-3"), names({"x", "y"}));
  EXPECT_EQ(promql_metric_names("redlock:voting_nodes - redlock:quorum"),
            names({"redlock:voting_nodes", "redlock:quorum"}));
  EXPECT_EQ(promql_metric_names("q == 1 unless on (job, instance) p and r or s"), names({"q", "p", "r", "s"}));
  EXPECT_EQ(promql_metric_names(R"(x{l="} by (y) {", m='\'z'} # c {d}
 and min_over_time(w[10m:1m]) == 0x1f and ${v} and $u)"),
            names({"x", "w"}));
  EXPECT_EQ(promql_metric_names("topk(3, quantile(0.5, z)) and inf > nan"), names({"z"}));
  EXPECT_EQ(promql_metric_names(""), names());
}

TEST(MonitoringFiles, rules_exprs_reads_inline_quoted_and_block_values) {
  const std::string yaml =
      "groups:\n"
      "  - name: g\n"
      "    rules:\n"
      "      - record: job:x:rate5m\n"
      "        expr: |\n"
      "          sum by (job) (\n"
      "            rate(x[5m])\n"
      "          )\n"
      "      - alert: A\n"
      "        expr: job:x:rate5m > 0\n"
      "        for: 1m\n"
      "      - alert: B\n"
      "        expr: \"y == 0\"\n"
      "      - expr: >-\n"
      "          z\n"
      "        alert: C\n";
  EXPECT_EQ(test::monitoring::rules_exprs(yaml),
            (std::vector<std::string>{"sum by (job) (\n  rate(x[5m])\n)\n", "job:x:rate5m > 0", "y == 0", "z\n"}));
  EXPECT_EQ(test::monitoring::recorded_names(yaml), names({"job:x:rate5m"}));
}

TEST(MonitoringFiles, json_string_values_decode_escapes_at_any_depth) {
  const std::string json =
      R"({"panels":[{"targets":[{"expr": "a{l=\"v\"}\n+ b"},{"expr":"c\u0020d"}]},{"expr":1},)"
      R"({"panels":[{"expr" : "e\\f"}]}], "exprx":"no"})";
  EXPECT_EQ(test::monitoring::json_string_values(json, "expr"),
            (std::vector<std::string>{"a{l=\"v\"}\n+ b", "c d", "e\\f"}));
  EXPECT_EQ(test::monitoring::label_values_expr("label_values(m{job=~\"$job\"}, instance)"), "m{job=~\"$job\"}");
  EXPECT_EQ(test::monitoring::label_values_expr("prometheus"), std::nullopt);
}

TEST(MonitoringFiles, family_of_strips_bucket_sum_count_of_histograms_and_summaries_only) {
  const auto type_of = [](const std::string& f) -> std::string {
    if (f == "h") return "histogram";
    if (f == "s") return "summary";
    if (f == "g" || f == "g_count") return "gauge";
    return "";
  };
  using test::monitoring::family_of;
  EXPECT_EQ(family_of("h_bucket", type_of), "h");
  EXPECT_EQ(family_of("h_sum", type_of), "h");
  EXPECT_EQ(family_of("s_count", type_of), "s");
  EXPECT_EQ(family_of("s", type_of), "s");
  EXPECT_EQ(family_of("s_bucket", type_of), std::nullopt);  // a summary has no buckets
  EXPECT_EQ(family_of("g_sum", type_of), std::nullopt);     // nor does a gauge
  EXPECT_EQ(family_of("g_count", type_of), "g_count");      // a family of its own
  EXPECT_EQ(family_of("missing", type_of), std::nullopt);
}

}  // namespace
}  // namespace redlock::cli
