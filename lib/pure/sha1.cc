#include "pure/sha1.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace redlock::detail {

std::string sha1_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest fails only without memory or a SHA-1 implementation: nothing a
  // caller could recover from, and a wrong script name would be silent.
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha1(), nullptr) != 1 || len != 20) std::abort();
  static const char digits[] = "0123456789abcdef";
  std::string out(40, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = digits[md[i] >> 4];
    out[2 * i + 1] = digits[md[i] & 15];
  }
  return out;
}

}  // namespace redlock::detail
