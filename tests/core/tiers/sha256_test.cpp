// SHA-256 against the FIPS 180-4 / NIST example vectors, and the incremental API.
#include "core/tiers/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/common/assert.h"

namespace kvsim {
namespace {

std::string sha_hex(std::string_view s) {
  return to_hex(Sha256::hash(s));
}

constexpr std::string_view k448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr std::string_view k896 =
    "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopq"
    "rsmnopqrstnopqrstu";

TEST(Sha256, NistVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex(k448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_hex(k896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // 55 bytes: the length fits in the last block; 56: it spills into a new block; 64: a full
  // block of message, then a block of padding only. (Digests from Python's hashlib.)
  EXPECT_EQ(sha_hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, OneMillionAInUnevenChunks) {
  Sha256 h;
  const std::string chunk(997, 'a');  // prime, so chunks straddle block boundaries
  size_t fed = 0;
  while (fed < 1000000) {
    const size_t n = std::min(chunk.size(), size_t{1000000} - fed);
    h.update(std::string_view(chunk).substr(0, n));
    fed += n;
  }
  EXPECT_EQ(to_hex(h.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotForEverySplit) {
  std::vector<uint8_t> msg(200);
  for (size_t i = 0; i < msg.size(); ++i)
    msg[i] = static_cast<uint8_t>(i * 31 + 7);
  const Sha256Digest whole = Sha256::hash(msg);
  for (size_t a = 0; a <= msg.size(); a += 3) {
    for (size_t b = a; b <= msg.size(); b += 17) {
      Sha256 h;
      const std::span<const uint8_t> m(msg);
      h.update(m.subspan(0, a));
      h.update(m.subspan(a, b - a));
      h.update(m.subspan(b));
      ASSERT_EQ(h.finish(), whole) << "split at " << a << ", " << b;
    }
  }
}

TEST(Sha256, BytesAndTextAgree) {
  const std::string text = "kvsim";
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  EXPECT_EQ(Sha256::hash(bytes), Sha256::hash(text));
}

TEST(Sha256, UseAfterFinishIsAProgrammerError) {
  ScopedThrowingAsserts asserts;
  Sha256 h;
  h.update("abc");
  (void)h.finish();
  EXPECT_THROW(h.update("x"), AssertionFailure);
  EXPECT_THROW((void)h.finish(), AssertionFailure);
}

TEST(Sha256, HexIsLowercaseMostSignificantNibbleFirst) {
  const std::vector<uint8_t> bytes{0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(bytes), "000fa0ff");
  EXPECT_EQ(to_hex(std::span<const uint8_t>()), "");
}

}  // namespace
}  // namespace kvsim
