// Unit tests of include/redlock/error.h and to_string(node_status): the public
// error category, its messages and permanence, and node status names.
#include "redlock/error.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <system_error>

#include "redlock/client.h"
#include "redlock/report.h"

namespace redlock {
namespace {

constexpr errc kAllErrc[] = {
    errc::contended, errc::unavailable,      errc::validity_exhausted, errc::lock_lost,
    errc::not_owner, errc::invalid_argument, errc::auth_failed,        errc::wrong_type,
    errc::cancelled, errc::would_deadlock,   errc::extension_limit,    errc::permission_denied,
    errc::tls_failed,
};

constexpr node_status kAllStatuses[] = {
    node_status::pending,    node_status::ok,           node_status::held,
    node_status::not_owner,  node_status::timeout,      node_status::connection_error,
    node_status::auth_error, node_status::server_error, node_status::protocol_error,
    node_status::cancelled,  node_status::excluded,     node_status::tls_error,
};

TEST(ErrorCategory, IsNamedRedlock) { EXPECT_STREQ(category().name(), "redlock"); }

TEST(ErrorCategory, IsASingleton) { EXPECT_EQ(&category(), &category()); }

TEST(ErrorCategory, EnumeratorsAreNumberedFromOne) {
  for (std::size_t i = 0; i < std::size(kAllErrc); ++i) {
    EXPECT_EQ(static_cast<int>(kAllErrc[i]), static_cast<int>(i) + 1);
  }
}

TEST(ErrorCategory, EveryCodeHasADistinctNonEmptyMessage) {
  std::set<std::string> messages;
  const std::string unknown = category().message(9999);
  for (errc e : kAllErrc) {
    const std::string m = make_error_code(e).message();
    EXPECT_FALSE(m.empty()) << static_cast<int>(e);
    EXPECT_NE(m, unknown) << static_cast<int>(e);
    messages.insert(m);
  }
  EXPECT_EQ(messages.size(), std::size(kAllErrc));
}

TEST(ErrorCategory, UnknownValuesHaveAGenericMessage) {
  EXPECT_EQ(category().message(0), "success");
  EXPECT_EQ(category().message(9999), "unknown redlock error");
  EXPECT_EQ(category().message(-1), "unknown redlock error");
}

TEST(ErrcToString, EveryCodeHasADistinctIdentifierName) {
  std::set<std::string> names;
  for (errc e : kAllErrc) {
    const std::string n = to_string(e);
    EXPECT_NE(n, "unknown") << static_cast<int>(e);
    EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << n;
    names.insert(n);
  }
  EXPECT_EQ(names.size(), std::size(kAllErrc));
  EXPECT_STREQ(to_string(errc::contended), "contended");
  EXPECT_STREQ(to_string(errc::tls_failed), "tls_failed");
  EXPECT_STREQ(to_string(static_cast<errc>(9999)), "unknown");
}

TEST(MakeErrorCode, RoundTripsValueAndCategory) {
  for (errc e : kAllErrc) {
    const std::error_code ec = make_error_code(e);
    EXPECT_EQ(ec.value(), static_cast<int>(e));
    EXPECT_EQ(&ec.category(), &category());
    EXPECT_TRUE(static_cast<bool>(ec));
    EXPECT_EQ(static_cast<errc>(ec.value()), e);
  }
}

TEST(MakeErrorCode, EnumeratorsConvertImplicitlyAndCompareEqual) {
  for (errc e : kAllErrc) {
    const std::error_code ec = e;  // via is_error_code_enum
    EXPECT_TRUE(ec == e);
    EXPECT_TRUE(e == ec);
    for (errc other : kAllErrc) {
      if (other == e) continue;
      EXPECT_TRUE(ec != other) << static_cast<int>(e) << " vs " << static_cast<int>(other);
    }
  }
}

TEST(MakeErrorCode, DefaultErrorCodeEqualsNoEnumerator) {
  const std::error_code ok;
  for (errc e : kAllErrc) EXPECT_FALSE(ok == e);
}

TEST(MakeErrorCode, SameValueInAnotherCategoryIsNotEqual) {
  for (errc e : kAllErrc) {
    EXPECT_FALSE(std::error_code(static_cast<int>(e), std::generic_category()) == e);
    EXPECT_FALSE(std::error_code(static_cast<int>(e), std::system_category()) == e);
  }
}

TEST(IsPermanent, OnlyErrorsAnotherAttemptCannotFix) {
  EXPECT_TRUE(is_permanent(errc::invalid_argument));
  EXPECT_TRUE(is_permanent(errc::auth_failed));
  EXPECT_TRUE(is_permanent(errc::wrong_type));
  EXPECT_TRUE(is_permanent(errc::cancelled));
  EXPECT_TRUE(is_permanent(errc::would_deadlock));
  EXPECT_TRUE(is_permanent(errc::extension_limit));
  EXPECT_TRUE(is_permanent(errc::permission_denied));
  EXPECT_TRUE(is_permanent(errc::tls_failed));

  EXPECT_FALSE(is_permanent(errc::contended));
  EXPECT_FALSE(is_permanent(errc::unavailable));
  EXPECT_FALSE(is_permanent(errc::validity_exhausted));
  EXPECT_FALSE(is_permanent(errc::lock_lost));
  EXPECT_FALSE(is_permanent(errc::not_owner));
}

TEST(IsPermanent, SuccessAndForeignCodesAreNotPermanent) {
  EXPECT_FALSE(is_permanent(std::error_code{}));
  EXPECT_FALSE(
      is_permanent(std::error_code(static_cast<int>(errc::invalid_argument), std::generic_category())));
  EXPECT_FALSE(is_permanent(std::make_error_code(std::errc::invalid_argument)));
}

TEST(ConfigError, CarriesInvalidArgumentAndTheMessage) {
  const config_error e("node URI 'redis://h:0': port must be a number from 1 to 65535");
  EXPECT_EQ(e.code(), errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("port must be a number"), std::string::npos);
}

TEST(NodeStatusToString, EveryStatusHasADistinctName) {
  std::set<std::string> names;
  for (node_status s : kAllStatuses) {
    const std::string name = to_string(s);
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "unknown") << static_cast<int>(s);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size(kAllStatuses));
}

TEST(NodeStatusToString, NamesTheCommonStatuses) {
  EXPECT_STREQ(to_string(node_status::ok), "ok");
  EXPECT_STREQ(to_string(node_status::held), "held");
  EXPECT_STREQ(to_string(node_status::timeout), "timeout");
  EXPECT_STREQ(to_string(node_status::pending), "pending");
  EXPECT_STREQ(to_string(node_status::cancelled), "cancelled");
}

TEST(NodeStatusToString, OutOfRangeValueIsUnknown) {
  EXPECT_STREQ(to_string(static_cast<node_status>(200)), "unknown");
}

}  // namespace
}  // namespace redlock
