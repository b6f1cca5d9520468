// A small writer for the one JSON object each command prints with --json. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {

// `s` as a JSON string literal, quotes included. Control characters are escaped;
// bytes that are not valid UTF-8 become U+FFFD, so the output is always valid JSON.
std::string json_quote(std::string_view s);

// Builds compact JSON in order. Commas are placed automatically; the caller nests
// begin_*/end_* correctly and gives a key before each value inside an object.
class json_writer {
 public:
  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();
  json_writer& key(std::string_view k);

  json_writer& string(std::string_view s);
  json_writer& boolean(bool b);
  json_writer& number(std::int64_t n);
  json_writer& number(std::uint64_t n);
  // Fixed-point with `decimals` digits after the point; null when not finite.
  json_writer& number(double d, int decimals);
  json_writer& null();

  json_writer& string_or_null(const std::optional<std::string>& s) { return s ? string(*s) : null(); }

  const std::string& str() const noexcept { return out_; }

 private:
  void before_value();

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace redlock::cli
