// A reply parsed by hiredis's own reader from RESP bytes, for unit tests of code
// that reads replies (reply_test.cc, handshake_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace redlock::detail::test {

struct hiredis_reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using parsed_reply = std::unique_ptr<redisReply, hiredis_reply_deleter>;

// nullptr (and a test failure) when `wire` is not one whole reply.
inline parsed_reply parse_resp(std::string_view wire) {
  redisReader* reader = redisReaderCreate();
  void* out = nullptr;
  const bool ok = redisReaderFeed(reader, wire.data(), wire.size()) == REDIS_OK &&
                  redisReaderGetReply(reader, &out) == REDIS_OK && out != nullptr;
  redisReaderFree(reader);
  if (!ok) {
    ADD_FAILURE() << "hiredis could not parse the test reply";
    if (out != nullptr) freeReplyObject(out);
    return nullptr;
  }
  return parsed_reply(static_cast<redisReply*>(out));
}

// RESP2 builders, so a test reply reads as its structure:
// arr({bulk("slots"), arr({num(0), num(5460)})}).
inline std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }
inline std::string num(long long v) { return ":" + std::to_string(v) + "\r\n"; }
inline std::string arr(std::initializer_list<std::string> items) {
  std::string out = "*" + std::to_string(items.size()) + "\r\n";
  for (const std::string& i : items) out += i;
  return out;
}
inline const std::string nil = "$-1\r\n";

}  // namespace redlock::detail::test
