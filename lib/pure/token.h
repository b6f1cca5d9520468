// Owner tokens from the OS CSPRNG, and SHA-1 for script digests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace redlock::detail {

// 128 random bits from getrandom(2), as 32 lowercase hex characters. Each call
// asks the kernel (nothing is cached in the process), so no two processes share
// a token, fork() or not.
// Aborts the process if the kernel cannot supply randomness (never seen on Linux
// >= 3.17; a lock without a unique token would be unsafe).
std::string make_token();

// Fills `n` bytes from getrandom(2); same failure policy.
void random_bytes(void* out, std::size_t n);

// SHA-1 of `data` as 40 lowercase hex characters (what EVALSHA takes).
std::string sha1_hex(std::string_view data);

}  // namespace redlock::detail
