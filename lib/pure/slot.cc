#include "pure/slot.h"

#include <array>

namespace redlock::detail {
namespace {

constexpr std::array<std::uint16_t, 256> crc16_table() {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
    t[i] = static_cast<std::uint16_t>(crc & 0xffff);
  }
  return t;
}

constexpr std::array<std::uint16_t, 256> kCrc16Table = crc16_table();

}  // namespace

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const std::size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) noexcept { return crc16(hash_tag(key)) & (kClusterSlots - 1); }

}  // namespace redlock::detail
