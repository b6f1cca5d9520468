// Unit tests of lib/uri.h: node URI parsing, error messages and password redaction.
#include "pure/uri.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace redlock::detail {
namespace {

struct parse_outcome {
  bool ok = false;
  node_address address;
  std::string error;
};

parse_outcome parse(std::string_view uri) {
  parse_outcome p;
  p.ok = parse_node_uri(uri, p.address, p.error);
  return p;
}

::testing::AssertionResult contains(const std::string& haystack, std::string_view needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' does not contain '" << needle << "'";
}

::testing::AssertionResult lacks(const std::string& haystack, std::string_view needle) {
  if (haystack.find(needle) == std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' contains '" << needle << "'";
}

// Parses `uri`, expects failure, and checks the message names the redacted URI and
// the problem.
void expect_rejected(std::string_view uri, std::string_view problem) {
  SCOPED_TRACE(::testing::Message() << "uri: " << redact_uri(uri));
  const parse_outcome p = parse(uri);
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(contains(p.error, "'" + redact_uri(uri) + "'"));
  EXPECT_TRUE(contains(p.error, problem));
}

// --- accepted URIs ---

TEST(ParseNodeUri, HostOnlyGetsDefaultPortDbAndNoCredentials) {
  const parse_outcome p = parse("redis://cache.example.com");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.type, node_address::kind::tcp);
  EXPECT_EQ(p.address.host, "cache.example.com");
  EXPECT_EQ(p.address.port, 6379);
  EXPECT_EQ(p.address.db, 0);
  EXPECT_EQ(p.address.username, "");
  EXPECT_EQ(p.address.password, "");
  EXPECT_FALSE(p.address.has_password);
  EXPECT_EQ(p.address.path, "");
  EXPECT_EQ(p.address.display, "redis://cache.example.com");
}

TEST(ParseNodeUri, HostAndPort) {
  const parse_outcome p = parse("redis://10.0.0.7:7001");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.host, "10.0.0.7");
  EXPECT_EQ(p.address.port, 7001);
  EXPECT_EQ(p.address.db, 0);
}

TEST(ParseNodeUri, PortBoundsOneAndMaxAreAccepted) {
  const parse_outcome low = parse("redis://h:1");
  ASSERT_TRUE(low.ok) << low.error;
  EXPECT_EQ(low.address.port, 1);
  const parse_outcome high = parse("redis://h:65535");
  ASSERT_TRUE(high.ok) << high.error;
  EXPECT_EQ(high.address.port, 65535);
}

TEST(ParseNodeUri, DatabaseNumberAfterSlash) {
  const parse_outcome with_port = parse("redis://h:7000/3");
  ASSERT_TRUE(with_port.ok) << with_port.error;
  EXPECT_EQ(with_port.address.port, 7000);
  EXPECT_EQ(with_port.address.db, 3);

  const parse_outcome without_port = parse("redis://h/15");
  ASSERT_TRUE(without_port.ok) << without_port.error;
  EXPECT_EQ(without_port.address.host, "h");
  EXPECT_EQ(without_port.address.port, 6379);
  EXPECT_EQ(without_port.address.db, 15);

  const parse_outcome max_db = parse("redis://h/2147483647");
  ASSERT_TRUE(max_db.ok) << max_db.error;
  EXPECT_EQ(max_db.address.db, 2147483647L);
}

TEST(ParseNodeUri, TrailingSlashMeansDatabaseZero) {
  const parse_outcome p = parse("redis://h:7000/");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.db, 0);
}

TEST(ParseNodeUri, UserAndPassword) {
  const parse_outcome p = parse("redis://alice:s3cret@h:7000/2");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.username, "alice");
  EXPECT_EQ(p.address.password, "s3cret");
  EXPECT_TRUE(p.address.has_password);
  EXPECT_EQ(p.address.host, "h");
  EXPECT_EQ(p.address.port, 7000);
  EXPECT_EQ(p.address.db, 2);
  EXPECT_EQ(p.address.display, "redis://alice:***@h:7000/2");
}

TEST(ParseNodeUri, PasswordWithoutUserUsesDefaultUser) {
  const parse_outcome p = parse("redis://:s3cret@h");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.username, "");
  EXPECT_EQ(p.address.password, "s3cret");
  EXPECT_TRUE(p.address.has_password);
  EXPECT_EQ(p.address.host, "h");
  EXPECT_EQ(p.address.display, "redis://:***@h");
}

TEST(ParseNodeUri, PercentEncodedUserAndPasswordAreDecoded) {
  const parse_outcome p = parse("redis://us%65r:p%40ss@h");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.username, "user");
  EXPECT_EQ(p.address.password, "p@ss");
  EXPECT_EQ(p.address.display, "redis://us%65r:***@h");
}

TEST(ParseNodeUri, PercentDecodingAcceptsBothHexCases) {
  const parse_outcome p = parse("redis://u:%3a%3A%2f%2F%25@h");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.password, ":://%");
}

TEST(ParseNodeUri, PercentEscapeAtTheVeryEndOfThePasswordIsDecoded) {
  const parse_outcome p = parse("redis://u:ab%21@h");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.password, "ab!");
}

TEST(ParseNodeUri, UnencodedAtInPasswordSplitsAtTheLastAt) {
  const parse_outcome p = parse("redis://u:p@ss@h:7000");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.username, "u");
  EXPECT_EQ(p.address.password, "p@ss");
  EXPECT_EQ(p.address.host, "h");
  EXPECT_EQ(p.address.port, 7000);
  EXPECT_EQ(p.address.display, "redis://u:***@h:7000");
}

TEST(ParseNodeUri, ColonInPasswordBelongsToThePassword) {
  const parse_outcome p = parse("redis://u:a:b@h");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.username, "u");
  EXPECT_EQ(p.address.password, "a:b");
}

TEST(ParseNodeUri, BracketedIpv6WithPort) {
  const parse_outcome p = parse("redis://[::1]:6380");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.type, node_address::kind::tcp);
  EXPECT_EQ(p.address.host, "::1");
  EXPECT_EQ(p.address.port, 6380);
}

TEST(ParseNodeUri, BracketedIpv6WithoutPortUsesDefaultPort) {
  const parse_outcome p = parse("redis://[2001:db8::1]/4");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.host, "2001:db8::1");
  EXPECT_EQ(p.address.port, 6379);
  EXPECT_EQ(p.address.db, 4);
}

TEST(ParseNodeUri, BracketedIpv6WithCredentials) {
  const parse_outcome p = parse("redis://u:pw@[fe80::2]:7002/1");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.host, "fe80::2");
  EXPECT_EQ(p.address.port, 7002);
  EXPECT_EQ(p.address.password, "pw");
  EXPECT_EQ(p.address.display, "redis://u:***@[fe80::2]:7002/1");
}

TEST(ParseNodeUri, SchemeIsCaseInsensitive) {
  const parse_outcome tcp = parse("REDIS://h:7000");
  ASSERT_TRUE(tcp.ok) << tcp.error;
  EXPECT_EQ(tcp.address.port, 7000);
  const parse_outcome unix_socket = parse("Unix:///tmp/x.sock");
  ASSERT_TRUE(unix_socket.ok) << unix_socket.error;
  EXPECT_EQ(unix_socket.address.path, "/tmp/x.sock");
}

TEST(ParseNodeUri, UnixSocketPath) {
  const parse_outcome p = parse("unix:///tmp/x.sock");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.type, node_address::kind::unix_socket);
  EXPECT_EQ(p.address.path, "/tmp/x.sock");
  EXPECT_EQ(p.address.db, 0);
  EXPECT_FALSE(p.address.has_password);
  EXPECT_EQ(p.address.display, "unix:///tmp/x.sock");
}

TEST(ParseNodeUri, UnixSocketWithDbQuery) {
  const parse_outcome p = parse("unix:///tmp/x.sock?db=3");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.type, node_address::kind::unix_socket);
  EXPECT_EQ(p.address.path, "/tmp/x.sock");
  EXPECT_EQ(p.address.db, 3);
}

TEST(ParseNodeUri, UnixSocketPathOf107BytesIsAccepted) {
  const std::string path = "/" + std::string(106, 'p');
  ASSERT_EQ(path.size(), 107u);
  const parse_outcome p = parse("unix://" + path);
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.path, path);
}

TEST(ParseNodeUri, ResetsOutputFromAPreviousParse) {
  node_address address;
  std::string error;
  ASSERT_TRUE(parse_node_uri("redis://u:pw@h:7000/5", address, error)) << error;
  ASSERT_TRUE(parse_node_uri("redis://other", address, error)) << error;
  EXPECT_EQ(address.host, "other");
  EXPECT_EQ(address.port, 6379);
  EXPECT_EQ(address.db, 0);
  EXPECT_EQ(address.username, "");
  EXPECT_EQ(address.password, "");
  EXPECT_FALSE(address.has_password);
}

// --- rejected URIs: each message names the redacted URI and the problem ---

TEST(ParseNodeUri, RejectsEmptyUri) { expect_rejected("", "empty URI"); }

TEST(ParseNodeUri, RejectsWrongScheme) {
  expect_rejected("http://h:6379", "scheme must be redis://, rediss:// (TLS) or unix:// (or, for a Redis Cluster");
  expect_rejected("h:6379", "scheme must be redis://, rediss:// (TLS) or unix:// (or, for a Redis Cluster");
  expect_rejected("redis:/h:6379", "scheme must be redis://, rediss:// (TLS) or unix:// (or, for a Redis Cluster");
}

TEST(ParseNodeUri, TlsSchemeSetsTheTlsFlagAndKeepsTheRestOfTheSyntax) {
  const parse_outcome p = parse("rediss://alice:s3cret@cache.example:6380/2");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_TRUE(p.address.tls);
  EXPECT_EQ(p.address.host, "cache.example");
  EXPECT_EQ(p.address.port, 6380);
  EXPECT_EQ(p.address.db, 2);
  EXPECT_EQ(p.address.username, "alice");
  EXPECT_EQ(p.address.password, "s3cret");
  EXPECT_EQ(p.address.display, "rediss://alice:***@cache.example:6380/2");
  const parse_outcome v6 = parse("REDISS://[::1]");
  ASSERT_TRUE(v6.ok) << v6.error;
  EXPECT_TRUE(v6.address.tls);
  EXPECT_EQ(v6.address.host, "::1");
  EXPECT_EQ(v6.address.port, 6379);
}

TEST(ParseNodeUri, PlainSchemesAreNotTls) {
  EXPECT_FALSE(parse("redis://h:6379").address.tls);
  EXPECT_FALSE(parse("unix:///tmp/x.sock").address.tls);
}

TEST(ParseNodeUri, TlsUriRejectionsNameTheRedactedTlsUri) {
  expect_rejected("rediss://", "missing host");
  expect_rejected("rediss://h:0", "port must be a number from 1 to 65535");
  expect_rejected("rediss://h?db=1", "query parameters are not supported");
  const parse_outcome p = parse("rediss://u:pw@h:0");
  ASSERT_FALSE(p.ok);
  EXPECT_EQ(p.address.display, "rediss://u:***@h:0");
}

TEST(ParseNodeUri, RejectsMissingHost) {
  expect_rejected("redis://", "missing host");
  expect_rejected("redis://:6379", "missing host");
  expect_rejected("redis:///0", "missing host");
  expect_rejected("redis://u:pw@", "missing host");
  expect_rejected("redis://u:pw@:6379/1", "missing host");
  expect_rejected("redis://[]:6379", "missing host");
}

TEST(ParseNodeUri, RejectsPortZero) {
  expect_rejected("redis://h:0", "port must be a number from 1 to 65535");
}

TEST(ParseNodeUri, RejectsPortAboveRange) {
  expect_rejected("redis://h:65536", "port must be a number from 1 to 65535");
  expect_rejected("redis://h:99999999999", "port must be a number from 1 to 65535");
  expect_rejected("redis://[::1]:65536", "port must be a number from 1 to 65535");
}

TEST(ParseNodeUri, RejectsNonNumericPort) {
  expect_rejected("redis://h:abc", "port must be a number from 1 to 65535");
  expect_rejected("redis://h:-1", "port must be a number from 1 to 65535");
  expect_rejected("redis://h:+80", "port must be a number from 1 to 65535");
  expect_rejected("redis://h:80x", "port must be a number from 1 to 65535");
  expect_rejected("redis://h:1:2", "port must be a number from 1 to 65535");
}

TEST(ParseNodeUri, RejectsEmptyPort) {
  expect_rejected("redis://h:", "empty port after ':'");
  expect_rejected("redis://h:/0", "empty port after ':'");
  expect_rejected("redis://[::1]:", "empty port after ':'");
}

TEST(ParseNodeUri, RejectsNonNumericDatabase) {
  expect_rejected("redis://h/x", "database must be a non-negative integer");
  expect_rejected("redis://h:7000/-1", "database must be a non-negative integer");
  expect_rejected("redis://h/1/2", "database must be a non-negative integer");
  expect_rejected("redis://h/2147483648", "database must be a non-negative integer");
}

TEST(ParseNodeUri, RejectsQueryParametersOnTcpUris) {
  expect_rejected("redis://h:7000?db=1", "query parameters are not supported");
  expect_rejected("redis://h/1?timeout=5", "query parameters are not supported");
}

TEST(ParseNodeUri, RejectsUnterminatedIpv6Bracket) {
  expect_rejected("redis://[::1", "unterminated '[' in IPv6 host");
}

TEST(ParseNodeUri, RejectsCharactersAfterIpv6Bracket) {
  expect_rejected("redis://[::1]6380", "unexpected characters after ']'");
}

TEST(ParseNodeUri, RejectsInvalidHostCharacters) {
  expect_rejected("redis://ho st:6379", "host contains an invalid character");
  expect_rejected("redis://h%41:6379", "host contains an invalid character");
  expect_rejected("redis://[::1%eth0]:6379", "host contains an invalid character");
}

TEST(ParseNodeUri, RejectsRelativeUnixPath) {
  expect_rejected("unix://tmp/x.sock", "unix socket path must be absolute");
  expect_rejected("unix://", "unix socket path must be absolute");
  expect_rejected("unix://?db=1", "unix socket path must be absolute");
}

TEST(ParseNodeUri, RejectsUnknownUnixQueryParameter) {
  expect_rejected("unix:///tmp/x.sock?timeout=1", "unknown query parameter (only db=N is supported)");
  expect_rejected("unix:///tmp/x.sock?db=1&timeout=1", "unknown query parameter");
  expect_rejected("unix:///tmp/x.sock?&db=1", "unknown query parameter");
}

TEST(ParseNodeUri, RejectsNonNumericUnixDb) {
  expect_rejected("unix:///tmp/x.sock?db=x", "db must be a non-negative integer");
  expect_rejected("unix:///tmp/x.sock?db=", "db must be a non-negative integer");
  expect_rejected("unix:///tmp/x.sock?db=-1", "db must be a non-negative integer");
}

TEST(ParseNodeUri, RejectsUnixPathLongerThan107Bytes) {
  const std::string path = "/" + std::string(107, 'p');
  expect_rejected("unix://" + path, "unix socket path is longer than 107 bytes");
}

TEST(ParseNodeUri, RejectsBadPercentEncodingInPassword) {
  expect_rejected("redis://u:p%zz@h", "bad percent-encoding in password");
  expect_rejected("redis://u:p%4@h", "bad percent-encoding in password");
  expect_rejected("redis://u:p%@h", "bad percent-encoding in password");
  expect_rejected("redis://u:%g0x@h", "bad percent-encoding in password");
}

TEST(ParseNodeUri, RejectsBadPercentEncodingInUserName) {
  expect_rejected("redis://u%g1:pw@h", "bad percent-encoding in user name");
  expect_rejected("redis://u%:pw@h", "bad percent-encoding in user name");
}

TEST(ParseNodeUri, RejectsUserWithoutPassword) {
  expect_rejected("redis://alice@h", "user name without password (use user:password@)");
}

TEST(ParseNodeUri, RejectsEmptyPasswordAfterColon) {
  expect_rejected("redis://alice:@h", "empty password after ':'");
}

TEST(ParseNodeUri, RejectsControlCharacters) {
  expect_rejected(std::string_view("redis://h\n:6379"), "contains control characters");
  expect_rejected(std::string_view("redis://h:6379\r"), "contains control characters");
  expect_rejected(std::string_view("redis://h\x1b[2J"), "contains control characters");
  expect_rejected(std::string_view("redis://h\x7f"), "contains control characters");
  expect_rejected(std::string_view("redis://h\0x", 10), "contains control characters");
  expect_rejected(std::string_view("unix:///tmp/x\t.sock"), "contains control characters");
}

TEST(ParseNodeUri, ControlCharacterErrorNeverEchoesTheRawCharacter) {
  const parse_outcome p = parse("redis://u:pw@h\x1b[31m");
  ASSERT_FALSE(p.ok);
  EXPECT_TRUE(lacks(p.error, "\x1b"));
  EXPECT_TRUE(contains(p.error, "redis://u:***@h?[31m"));
}

TEST(ParseNodeUri, DisplayIsTheRedactedUriOnFailureToo) {
  const parse_outcome p = parse("redis://u:pw@h:0");
  ASSERT_FALSE(p.ok);
  EXPECT_EQ(p.address.display, "redis://u:***@h:0");
}

// Every rejection of a URI that carries a password keeps the password out of the
// message and out of `display`.
TEST(ParseNodeUri, ErrorsNeverContainThePassword) {
  const std::string_view secret = "hunter2";
  const std::string uris[] = {
      "http://u:hunter2@h",
      "rediss://u:hunter2@h:6380/x",
      "redis://u:hunter2@",
      "redis://:hunter2@:6379",
      "redis://u:hunter2@h:0",
      "redis://u:hunter2@h:65536",
      "redis://u:hunter2@h:abc",
      "redis://u:hunter2@h:",
      "redis://u:hunter2@h/x",
      "redis://u:hunter2@h?db=1",
      "redis://u:hunter2@[::1",
      "redis://u:hunter2@[::1]x",
      "redis://u:hunter2@ho st",
      "redis://u:hunter2%zz@h",
      "redis://u%zz:hunter2@h",
      "redis://u:hunter2@h\n",
      "redis://u:hunt\x01"
      "er2@h",
      "redis://u:hunter2@@h:0",
      "unix://u:hunter2@/tmp/x.sock",
      "u:hunter2@h:6379",
  };
  for (const std::string& uri : uris) {
    SCOPED_TRACE(::testing::Message() << "uri index " << (&uri - uris));
    const parse_outcome p = parse(uri);
    EXPECT_FALSE(p.ok);
    EXPECT_FALSE(p.error.empty());
    EXPECT_TRUE(lacks(p.error, secret));
    EXPECT_TRUE(lacks(p.error, "hunt"));
    EXPECT_TRUE(lacks(p.address.display, "hunt"));
    EXPECT_TRUE(contains(p.error, "***"));
  }
}

// --- redact_uri ---

TEST(RedactUri, LeavesUrisWithoutPasswordUnchanged) {
  EXPECT_EQ(redact_uri("redis://h:7000/2"), "redis://h:7000/2");
  EXPECT_EQ(redact_uri("redis://[::1]:6380"), "redis://[::1]:6380");
  EXPECT_EQ(redact_uri("unix:///tmp/x.sock?db=3"), "unix:///tmp/x.sock?db=3");
  EXPECT_EQ(redact_uri(""), "");
}

TEST(RedactUri, ReplacesPasswordWithStars) {
  EXPECT_EQ(redact_uri("redis://alice:s3cret@h:7000/2"), "redis://alice:***@h:7000/2");
  EXPECT_EQ(redact_uri("redis://:s3cret@h"), "redis://:***@h");
  EXPECT_EQ(redact_uri("redis://u:p%40ss@h"), "redis://u:***@h");
}

TEST(RedactUri, PasswordContainingAtOrColonIsFullyHidden) {
  EXPECT_EQ(redact_uri("redis://u:p@ss@h"), "redis://u:***@h");
  EXPECT_EQ(redact_uri("redis://u:a:b@h"), "redis://u:***@h");
}

TEST(RedactUri, RedactsMalformedUris) {
  EXPECT_EQ(redact_uri("redis://u:pw@"), "redis://u:***@");
  EXPECT_EQ(redact_uri("http://u:pw@h"), "http://u:***@h");
  EXPECT_EQ(redact_uri("rediss://u:pw@h:6380"), "rediss://u:***@h:6380");
  EXPECT_EQ(redact_uri("u:pw@h:6379"), "u:***@h:6379");
  EXPECT_EQ(redact_uri("redis://u:pw@h:abc"), "redis://u:***@h:abc");
  EXPECT_EQ(redact_uri("redis://u:p%zz@h"), "redis://u:***@h");
  EXPECT_EQ(redact_uri("unix://:pw@/tmp/x.sock"), "unix://:***@/tmp/x.sock");
}

TEST(RedactUri, ReplacesControlCharactersWithQuestionMarks) {
  EXPECT_EQ(redact_uri("redis://h\n\r\t\x1b\x7f"), "redis://h?????");
  EXPECT_EQ(redact_uri("redis://u:pw@h\n"), "redis://u:***@h?");
  EXPECT_EQ(redact_uri("redis://u:p\nw@h"), "redis://u:***@h");
}

TEST(RedactUri, HidesEveryPasswordWhenSeveralUrisAreRunTogether) {
  const std::string shown = redact_uri("redis://a:pw1@h1,redis://b:pw2@h2");
  EXPECT_TRUE(lacks(shown, "pw1"));
  EXPECT_TRUE(lacks(shown, "pw2"));
}

// userinfo without ':' is rejected by the parser as "user name without password";
// the comment in redact_uri notes it may be a password-only form (redis://secret@h,
// which some clients accept). The rejection message echoes it, so it must be hidden.
// KNOWN FAILURE: redact_uri returns the URI unchanged.
TEST(RedactUri, HidesUserInfoWithoutColonBecauseItMayBeAPassword) {
  EXPECT_EQ(redact_uri("redis://hunter2@h:6379"), "redis://***@h:6379");
  const parse_outcome p = parse("redis://hunter2@h:6379");
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(lacks(p.error, "hunter2"));
}


// --- whole deployments as one node (issue 23): redis+cluster://, redis+sentinel:// ---

TEST(ParseNodeUri, ClusterUriNamesASeedAndFurtherSeeds) {
  const parse_outcome p = parse("redis+cluster://alice:s3cret@127.0.0.1:7000?seed=127.0.0.1:7001&seed=[::1]:7002");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.topology, node_address::deployment::cluster);
  EXPECT_FALSE(p.address.tls);
  EXPECT_EQ(p.address.host, "127.0.0.1");
  EXPECT_EQ(p.address.port, 7000);
  EXPECT_EQ(p.address.username, "alice");
  EXPECT_EQ(p.address.password, "s3cret");
  ASSERT_EQ(p.address.seeds.size(), 2u);
  EXPECT_EQ(p.address.seeds[0].host, "127.0.0.1");
  EXPECT_EQ(p.address.seeds[0].port, 7001);
  EXPECT_EQ(p.address.seeds[1].host, "::1");
  EXPECT_EQ(p.address.seeds[1].port, 7002);
  EXPECT_EQ(p.address.display, "redis+cluster://alice:***@127.0.0.1:7000?seed=127.0.0.1:7001&seed=[::1]:7002");
}

TEST(ParseNodeUri, ClusterUriAloneAndOverTls) {
  const parse_outcome one = parse("redis+cluster://cache.example");
  ASSERT_TRUE(one.ok) << one.error;
  EXPECT_EQ(one.address.topology, node_address::deployment::cluster);
  EXPECT_EQ(one.address.port, 6379);
  EXPECT_TRUE(one.address.seeds.empty());
  const parse_outcome tls = parse("REDISS+CLUSTER://cache.example:6380?seed=cache-2.example");
  ASSERT_TRUE(tls.ok) << tls.error;
  EXPECT_TRUE(tls.address.tls);
  EXPECT_EQ(tls.address.topology, node_address::deployment::cluster);
  ASSERT_EQ(tls.address.seeds.size(), 1u);
  EXPECT_EQ(tls.address.seeds[0].port, 6379) << "a seed without a port gets the default one";
}

TEST(ParseNodeUri, SentinelUriNamesTheMasterAndDefaultsToSentinelsPort) {
  const parse_outcome p = parse("redis+sentinel://u:pw@127.0.0.1/mymaster?seed=127.0.0.1:26380&seed=127.0.0.1:26381");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.topology, node_address::deployment::sentinel);
  EXPECT_EQ(p.address.port, 26379);
  EXPECT_EQ(p.address.master_name, "mymaster");
  EXPECT_EQ(p.address.db, 0);
  ASSERT_EQ(p.address.seeds.size(), 2u);
  EXPECT_EQ(p.address.seeds[1].port, 26381);
  const parse_outcome tls = parse("rediss+sentinel://127.0.0.1:26379/orders%2Dprimary");
  ASSERT_TRUE(tls.ok) << tls.error;
  EXPECT_TRUE(tls.address.tls);
  EXPECT_EQ(tls.address.master_name, "orders-primary");
}

TEST(ParseNodeUri, PlainUrisStayStandalone) {
  EXPECT_EQ(parse("redis://h").address.topology, node_address::deployment::standalone);
  EXPECT_EQ(parse("rediss://h").address.topology, node_address::deployment::standalone);
  EXPECT_EQ(parse("unix:///tmp/x.sock").address.topology, node_address::deployment::standalone);
  EXPECT_TRUE(parse("redis://h").address.seeds.empty());
}

TEST(ParseNodeUri, RejectsMalformedClusterAndSentinelUris) {
  expect_rejected("redis+cluster://", "missing host");
  expect_rejected("redis+cluster://h:0", "port must be a number from 1 to 65535");
  expect_rejected("redis+cluster://h/1", "a Redis Cluster has database 0 only");
  expect_rejected("redis+cluster://h?db=1", "unknown query parameter 'db'");
  expect_rejected("redis+cluster://h?seed=", "seed '': missing host");
  expect_rejected("redis+cluster://h?seed=x:70000", "seed 'x:70000': port must be a number");
  expect_rejected("redis+cluster://h:7000?seed=h:7000", "seed 'h:7000' is given twice");
  expect_rejected("redis+cluster://h?seed=a:1&seed=a:1", "seed 'a:1' is given twice");
  expect_rejected("redis+cluster://h?seed=u:pw@a:1", "a seed takes HOST:PORT only");
  expect_rejected("redis+sentinel://h:26379", "missing master name");
  expect_rejected("redis+sentinel://h:26379/", "missing master name");
  expect_rejected("redis+sentinel://h/a/b", "master name contains a space, '/' or a control character");
  expect_rejected("redis+sentinel://h/a%20b", "master name contains a space");
  expect_rejected("redis+sentinel://h/m%zz", "bad percent-encoding in master name");
  expect_rejected("redis+sentinel://h/m?timeout=1", "unknown query parameter 'timeout'");
  expect_rejected("redis+clusters://h", "scheme must be");
}

TEST(ParseNodeUri, ClusterAndSentinelRejectionsHideThePassword) {
  for (const char* uri : {"redis+cluster://u:hunter2@h:0", "redis+sentinel://u:hunter2@h",
                          "rediss+sentinel://u:hunter2@h/m?seed=bad:port"}) {
    const parse_outcome p = parse(uri);
    EXPECT_FALSE(p.ok) << uri;
    EXPECT_TRUE(lacks(p.error, "hunter2"));
    EXPECT_TRUE(contains(p.error, "***"));
  }
}

}  // namespace
}  // namespace redlock::detail
