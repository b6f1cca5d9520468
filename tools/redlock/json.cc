#include "json.h"

#include <cmath>
#include <cstdio>

namespace redlock::cli {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

void json_writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

json_writer& json_writer::begin_object() {
  before_value();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}

json_writer& json_writer::end_object() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}

json_writer& json_writer::begin_array() {
  before_value();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}

json_writer& json_writer::end_array() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  before_value();
  out_ += json_quote(k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

json_writer& json_writer::string(std::string_view s) {
  before_value();
  out_ += json_quote(s);
  return *this;
}

json_writer& json_writer::boolean(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

json_writer& json_writer::number(std::int64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

json_writer& json_writer::number(std::uint64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

json_writer& json_writer::number(double d, int decimals) {
  if (!std::isfinite(d)) return null();
  before_value();
  char buf[400];  // room for any finite double in fixed notation
  std::snprintf(buf, sizeof buf, "%.*f", decimals, d);
  out_ += buf;
  return *this;
}

json_writer& json_writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

}  // namespace redlock::cli
