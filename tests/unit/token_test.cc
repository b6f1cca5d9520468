// Unit tests of lib/token.h: owner tokens from the OS CSPRNG and SHA-1 digests.
#include "pure/sha1.h"
#include "pure/token.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <string_view>

namespace redlock::detail {
namespace {

bool is_lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

TEST(MakeToken, Is32LowercaseHexCharacters) {
  for (int i = 0; i < 100; ++i) {
    const std::string t = make_token();
    ASSERT_EQ(t.size(), 32u) << t;
    ASSERT_TRUE(is_lower_hex(t)) << t;
  }
}

TEST(MakeToken, ThousandTokensAreDistinct) {
  std::set<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.insert(make_token());
  EXPECT_EQ(tokens.size(), 1000u);
}

// A pre-fork server: the parent has drawn a token (anything cached per thread is
// warm), then forks workers. Two processes must never share a token, or one
// worker's contended attempt rolls back another's keys and both hold the lock.
TEST(MakeToken, ForkedChildrenNeverDrawTheParentsOrEachOthersTokens) {
  const std::string parent_token = make_token();
  constexpr int kChildren = 2, kPerChild = 8;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pids[kChildren];
  for (int c = 0; c < kChildren; ++c) {
    pids[c] = fork();
    ASSERT_GE(pids[c], 0);
    if (pids[c] == 0) {
      close(fds[0]);
      std::string out;
      for (int i = 0; i < kPerChild; ++i) out += make_token();
      const bool ok = write(fds[1], out.data(), out.size()) == static_cast<ssize_t>(out.size());
      _exit(ok ? 0 : 1);  // each write (256 bytes) is below PIPE_BUF: atomic
    }
  }
  close(fds[1]);
  std::string all;
  char buf[512];
  for (;;) {
    const ssize_t r = read(fds[0], buf, sizeof buf);
    if (r > 0) all.append(buf, static_cast<std::size_t>(r));
    if (r == 0 || (r < 0 && errno != EINTR)) break;
  }
  close(fds[0]);
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ASSERT_EQ(all.size(), std::size_t{32} * kChildren * kPerChild);
  std::set<std::string> tokens = {parent_token};
  for (std::size_t i = 0; i < all.size(); i += 32) tokens.insert(all.substr(i, 32));
  EXPECT_EQ(tokens.size(), std::size_t{1} + kChildren * kPerChild) << "a token repeated across fork()";
  // And the parent goes on drawing tokens no child drew.
  for (int i = 0; i < kPerChild; ++i) EXPECT_TRUE(tokens.insert(make_token()).second);
}

TEST(MakeToken, EveryHexDigitAppearsAtEveryPosition) {
  // 128 random bits, not a counter or a timestamp: over 2000 tokens each position
  // sees all 16 digits (a missing one has probability < 1e-50).
  std::array<std::set<char>, 32> digits;
  for (int i = 0; i < 2000; ++i) {
    const std::string t = make_token();
    for (std::size_t p = 0; p < t.size(); ++p) digits[p].insert(t[p]);
  }
  for (std::size_t p = 0; p < digits.size(); ++p) EXPECT_EQ(digits[p].size(), 16u) << "position " << p;
}

TEST(RandomBytes, FillsTheWholeBuffer) {
  // 4 KiB of randomness has essentially no chance of containing 64 zero bytes in a
  // row; a short read that left the tail untouched would.
  std::array<unsigned char, 4096> buf{};
  random_bytes(buf.data(), buf.size());
  int zero_run = 0, longest = 0;
  for (unsigned char b : buf) {
    zero_run = b == 0 ? zero_run + 1 : 0;
    longest = std::max(longest, zero_run);
  }
  EXPECT_LT(longest, 64);
}

TEST(RandomBytes, ZeroLengthIsANoOp) {
  unsigned char sentinel = 0xab;
  random_bytes(&sentinel, 0);
  EXPECT_EQ(sentinel, 0xab);
}

// FIPS 180 / RFC 3174 test vectors.
TEST(Sha1Hex, EmptyString) { EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709"); }

TEST(Sha1Hex, Abc) { EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d"); }

TEST(Sha1Hex, TwoBlockMessage) {
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(Sha1Hex, MillionAs) {
  EXPECT_EQ(sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1Hex, QuickBrownFox) {
  EXPECT_EQ(sha1_hex("The quick brown fox jumps over the lazy dog"),
            "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
}

// Lengths around the padding boundary (55/56 bytes: length fits / spills into a new
// block; 64: exactly one block of data). Reference values from Python's hashlib.
TEST(Sha1Hex, PaddingBoundaries) {
  EXPECT_EQ(sha1_hex(std::string(55, 'a')), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(sha1_hex(std::string(56, 'a')), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(sha1_hex(std::string(63, 'a')), "03f09f5b158a7a8cdad920bddc29b81c18a551f5");
  EXPECT_EQ(sha1_hex(std::string(64, 'a')), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
  EXPECT_EQ(sha1_hex(std::string(65, 'a')), "11655326c708d70319be2610e8a57d9a5b959d3b");
  EXPECT_EQ(sha1_hex(std::string(119, 'a')), "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56");
  EXPECT_EQ(sha1_hex(std::string(120, 'a')), "f34c1488385346a55709ba056ddd08280dd4c6d6");
}

TEST(Sha1Hex, HashesEmbeddedNulAndHighBytes) {
  EXPECT_EQ(sha1_hex(std::string_view("a\0b", 3)), "4a3dec2d1f8245280855c42db0ee4239f917fdb8");
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(sha1_hex(all_bytes), "4916d6bdb7f78e6803698cab32d1586ea457dfc8");
}

TEST(Sha1Hex, IsAlways40LowercaseHexCharacters) {
  for (std::size_t len = 0; len < 200; ++len) {
    const std::string h = sha1_hex(std::string(len, 'x'));
    ASSERT_EQ(h.size(), 40u);
    ASSERT_TRUE(is_lower_hex(h)) << h;
  }
}

}  // namespace
}  // namespace redlock::detail
