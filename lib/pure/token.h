// Owner tokens from the OS CSPRNG.
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

}  // namespace redlock::detail
