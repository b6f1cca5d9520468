// libFuzzer target: reply handling. Arbitrary bytes are fed, in fragments of
// fuzzer-chosen sizes, into hiredis's redisReader (as lib/connection.cc does), and
// every complete reply is classified for every script (lib/reply.h) and, when it
// is an error, by classify_error. Invariants: nothing crashes, and each vote is
// one of the statuses a reply can produce.
#include <fuzzer/FuzzedDataProvider.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "protocol/reply.h"

namespace {

using redlock::node_status;
using redlock::detail::classify_error;
using redlock::detail::classify_reply;
using redlock::detail::script_id;

bool valid_reply_status(node_status s) {
  return s == node_status::ok || s == node_status::held || s == node_status::not_owner ||
         s == node_status::auth_error || s == node_status::server_error || s == node_status::protocol_error;
}

// hiredis 0.14 has no maxelements (1.x caps it): a "*2000000000" header makes it
// calloc 16 GB, which libFuzzer would report as an out-of-memory. Inputs that
// announce more than 4096 elements are skipped, as hiredis's own reader fuzzer
// caps maxelements (at 1024).
bool announces_huge_array(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '*') continue;
    std::size_t j = i + 1;
    if (j < s.size() && s[j] == '-') continue;
    unsigned long long v = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9' && v < 100000)
      v = v * 10 + static_cast<unsigned>(s[j++] - '0');
    if (v > 4096) return true;
  }
  return false;
}

void classify_all(const redisReply* r) {
  for (unsigned s = 0; s < static_cast<unsigned>(script_id::count); ++s) {
    auto c = classify_reply(static_cast<script_id>(s), r);
    if (!valid_reply_status(c.v.status)) {
      std::fprintf(stderr, "fuzz_reply: unexpected status %d for script %u\n", static_cast<int>(c.v.status),
                   s);
      std::abort();
    }
    if (c.detail.size() > 4096) std::abort();  // details are bounded
  }
  if (r->type == REDIS_REPLY_ERROR) {
    auto c = classify_error(std::string_view(r->str, r->len));
    if (!valid_reply_status(c.v.status) || c.detail.find('\n') != std::string::npos) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (announces_huge_array(std::string(reinterpret_cast<const char*>(data), size))) return 0;
  FuzzedDataProvider in(data, size);
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) return 0;
  int replies = 0;
  while (in.remaining_bytes() > 0 && replies < 10000) {
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 64);
    const std::string chunk = in.ConsumeBytesAsString(n);
    if (redisReaderFeed(reader, chunk.data(), chunk.size()) != REDIS_OK) break;
    bool broken = false;
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
        broken = true;  // the connection would fail with protocol_error
        break;
      }
      if (reply == nullptr) break;
      classify_all(static_cast<redisReply*>(reply));
      freeReplyObject(reply);
      ++replies;
    }
    if (broken) break;
  }
  redisReaderFree(reader);
  return 0;
}
