// Unit tests of the redlock tool's pure parts: durations, the command line, JSON,
// latency statistics and command lookup. No network.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "args.h"
#include "duration.h"
#include "json.h"
#include "latency.h"
#include "process.h"

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
  for (const char* bad : {"",   "ms", "s",   "-1",   "+1", "-5s", "1.5s", "1e3", " 1",  "1 ",  "1 s",
                          "1h", "1d", "1us", "1sec", "1M", "1MS", "0x10", "1s2", "abc", "1ms5"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(Duration, RejectsValuesAboveTheMaximumWithoutOverflow) {
  EXPECT_EQ(parse_duration("1000000000000"), max_duration);
  EXPECT_FALSE(parse_duration("1000000000001").has_value());
  EXPECT_FALSE(parse_duration("1000000001s").has_value());
  EXPECT_FALSE(parse_duration("16666667m").has_value());
  EXPECT_FALSE(parse_duration("99999999999999999999").has_value());
  EXPECT_FALSE(parse_duration("18446744073709551617ms").has_value());
  EXPECT_FALSE(parse_duration("9223372036854775807s").has_value());
}

TEST(Duration, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(format_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(30'000)), "30s");
  EXPECT_EQ(format_duration(milliseconds(120'000)), "2m");
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
  // After "--" a -h belongs to the command.
  EXPECT_EQ(parse({"run", "r", "--ttl", "1s", "--", "ls", "-h"}).what, kind::ok);
}

struct bad_case {
  std::vector<std::string> args;
  const char* env;
  const char* message_part;
};

void PrintTo(const bad_case& c, std::ostream* os) {
  *os << "redlock";
  for (const auto& a : c.args) *os << " '" << a << "'";
}

class CommandLineRejects : public ::testing::TestWithParam<bad_case> {};

TEST_P(CommandLineRejects, WithAOneLineMessage) {
  const bad_case& c = GetParam();
  const parse_result r = parse_command_line(c.args, c.env);
  ASSERT_EQ(r.what, kind::error);
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
        bad_case{{"release", "r"}, nodes, "release needs RESOURCE and TOKEN"},
        bad_case{{"release", "r", ""}, nodes, "TOKEN must not be empty"},
        bad_case{{"status", "r", "extra"}, nodes, "unexpected argument \"extra\""},
        bad_case{{"bench", "r"}, nodes, "unexpected argument \"r\""},
        bad_case{{"status", "r", "--", "x"}, nodes, "status takes no \"--\""},
        bad_case{{"run", "r", "--ttl", "1s"}, nodes, "run needs a command after \"--\""},
        bad_case{{"run", "r", "--ttl", "1s", "--"}, nodes, "run needs a command after \"--\""},
        bad_case{{"run", "r", "--ttl", "1s", "--", ""}, nodes, "must not be empty"},
        bad_case{{"status", "r"}, nullptr, "no nodes"}, bad_case{{"status", "r"}, "  ", "no nodes"},
        bad_case{{"status", "r"}, "redis://a:1,,redis://b:2", "REDLOCK_NODES: empty URI"},
        bad_case{{"status", "r", "--nodes", ""}, nodes, "--nodes: empty node list"},
        bad_case{{"status", "r", "--nodes", "redis://a:1,"}, nodes, "--nodes: empty URI"},
        bad_case{{"status", "r", "--node-timeout", "0"}, nodes, "--node-timeout must be greater than 0"},
        bad_case{{"status", "r", "--connect-timeout", "1.5s"}, nodes, "--connect-timeout: bad duration"},
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

TEST(LockEnvironment, ReplacesInheritedLockVariables) {
  std::string a = "PATH=/bin", b = "REDLOCK_TOKEN=old", c = "REDLOCK_FENCE=9", d = "REDLOCK_NODES=redis://x";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  EXPECT_EQ(lock_environment(env, "res", "tok", std::nullopt),
            (std::vector<std::string>{"PATH=/bin", "REDLOCK_NODES=redis://x", "REDLOCK_RESOURCE=res",
                                      "REDLOCK_TOKEN=tok"}));
  EXPECT_EQ(lock_environment(env, "res", "tok", 42).back(), "REDLOCK_FENCE=42");
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
  ASSERT_EQ(bad.what, kind::error);
  EXPECT_NE(bad.error.find("REDLOCK_MAX_TTL"), std::string::npos) << bad.error;
  EXPECT_EQ(parse({"status", "x", "--max-ttl", "0"}).what, kind::error);
}

}  // namespace
}  // namespace redlock::cli
