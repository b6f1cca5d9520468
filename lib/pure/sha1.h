// SHA-1 as hex: the names scripts have on a server (EVALSHA) and the digest an
// election stores of its lock's token. libcrypto's, no copy of our own.
#pragma once

#include <string>
#include <string_view>

namespace redlock::detail {

// SHA-1 of `data` as 40 lowercase hex characters.
std::string sha1_hex(std::string_view data);

}  // namespace redlock::detail
