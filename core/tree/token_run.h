// TokenRun: a read-only run of tokens that shares its storage, the key of a tree node.
//
// Why: a node's key is never written after it is made, so it need not own a private copy.
// Splitting a node gives both halves views of the same storage (O(1), no token moves), and a
// caller that keeps its prompts in shared storage (the SGLang replay, a workload's prompt
// table) can insert them without any copy at all: the tree holds a reference, not the tokens.
//
// Invariants:
//  1. the tokens a run views never change while any run views them (storage made by copy_of
//     is immutable; a caller that shares its own storage promises the same);
//  2. a run keeps its whole storage alive: a node cut from a long prompt pins that prompt's
//     buffer until the last run into it goes (the price of not copying; bounded by the sizes
//     of the inserts that made the tree).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/common/types.h"
#include "core/tree/wide_ids.h"

namespace kvsim {

// How many leading tokens of a[0, n) and b[0, n) agree: whole chunks by memcmp (1024-token
// ones first: a call per 64 tokens was a third of a long match's cost), then token by token
// inside the first differing one.
inline size_t common_token_prefix(const Token* a, const Token* b, size_t n) {
  constexpr size_t kBigChunk = 1024;
  constexpr size_t kChunk = 64;
  size_t k = 0;
  while (k + kBigChunk <= n && std::memcmp(a + k, b + k, kBigChunk * sizeof(Token)) == 0)
    k += kBigChunk;
  while (k + kChunk <= n && std::memcmp(a + k, b + k, kChunk * sizeof(Token)) == 0)
    k += kChunk;
  while (k < n && a[k] == b[k])
    ++k;
  return k;
}

// Thrown by the core's wide-id calls that would store an id outside Token's range.
class TokenOutOfRange : public std::invalid_argument {
 public:
  TokenOutOfRange(size_t index, int64_t value)
      : std::invalid_argument("tokens[" + std::to_string(index) + "] = " + std::to_string(value) +
                              " does not fit in kvsim's 32-bit token id"),
        index_(index) {}
  size_t index() const { return index_; }

 private:
  size_t index_;
};

class TokenRun {
 public:
  TokenRun() = default;
  // Shares storage: `first` points at the run's first token and owns (or aliases an owner of)
  // the storage; the tokens must not change while any run views them.
  TokenRun(std::shared_ptr<const Token> first, size_t size) : data_(std::move(first)), size_(size) {
    KV_ASSERT(size_ == 0 || data_ != nullptr, "a token run of tokens needs storage");
  }
  // A run over new, immutable storage holding a copy of `tokens`.
  static TokenRun copy_of(std::span<const Token> tokens) {
    if (tokens.empty()) return {};
    std::shared_ptr<Token[]> buf = std::make_shared_for_overwrite<Token[]>(tokens.size());
    std::copy(tokens.begin(), tokens.end(), buf.get());
    return TokenRun(std::shared_ptr<const Token>(buf, buf.get()), tokens.size());
  }
  // A run over new storage holding `wide` narrowed to Tokens, or nullopt when some id does not
  // fit (one pass: the narrowing checks as it copies).
  static std::optional<TokenRun> try_narrowed_copy_of(std::span<const int64_t> wide) {
    if (wide.empty()) return TokenRun();
    std::shared_ptr<Token[]> buf = std::make_shared_for_overwrite<Token[]>(wide.size());
    if (!narrow_wide_ids(wide.data(), wide.size(), buf.get())) return std::nullopt;
    return TokenRun(std::shared_ptr<const Token>(buf, buf.get()), wide.size());
  }
  // The same for ids the caller checked (all_wide_ids_fit, core/tree/wide_ids.h).
  static TokenRun narrowed_copy_of(std::span<const int64_t> wide) {
    std::optional<TokenRun> run = try_narrowed_copy_of(wide);
    KV_ASSERT(run.has_value(), "a wide token id does not fit kvsim's 32-bit Token");
    return std::move(*run);
  }
  // Shares a whole vector's tokens (the vector moves into shared storage).
  static TokenRun adopt(std::vector<Token> tokens) {
    if (tokens.empty()) return {};
    auto owner = std::make_shared<const std::vector<Token>>(std::move(tokens));
    const Token* first = owner->data();
    const size_t n = owner->size();
    return TokenRun(std::shared_ptr<const Token>(std::move(owner), first), n);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Token* data() const { return data_.get(); }
  const Token* begin() const { return data_.get(); }
  const Token* end() const { return data_.get() + size_; }
  Token operator[](size_t i) const { return data_.get()[i]; }
  std::span<const Token> span() const { return {data_.get(), size_}; }
  operator std::span<const Token>() const { return span(); }  // NOLINT: a view, like string

  // [offset, offset + count) of this run, sharing its storage.
  TokenRun slice(size_t offset, size_t count) const {
    KV_ASSERT(offset <= size_ && count <= size_ - offset, "token run slice out of range");
    if (count == 0) return {};
    return TokenRun(std::shared_ptr<const Token>(data_, data_.get() + offset), count);
  }
  TokenRun first(size_t count) const { return slice(0, count); }
  TokenRun drop_front(size_t count) const { return slice(count, size_ - count); }

  // Same tokens (not same storage).
  friend bool operator==(const TokenRun& a, const TokenRun& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const TokenRun& a, const std::vector<Token>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::shared_ptr<const Token> data_;
  size_t size_ = 0;
};

}  // namespace kvsim
