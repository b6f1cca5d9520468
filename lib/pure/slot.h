// Redis Cluster's key space: CRC16 (XMODEM) and the hash slot of a key, with the
// hash-tag rule. Pure; no I/O.
#pragma once

#include <cstdint>
#include <string_view>

namespace redlock::detail {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), the
// checksum Redis Cluster hashes keys with. crc16("123456789") == 0x31C3.
std::uint16_t crc16(std::string_view data) noexcept;

// The part of `key` that is hashed: the text between the first '{' and the first
// '}' after it when that text is not empty, else the whole key (the cluster
// specification's hash-tag rule: "{user1000}.following" and "{user1000}.followers"
// share a slot; "{}x" and "x{}" hash whole).
std::string_view hash_tag(std::string_view key) noexcept;

// The slot, 0..16383, that serves `key`: crc16(hash_tag(key)) mod 16384.
int key_slot(std::string_view key) noexcept;

}  // namespace redlock::detail
