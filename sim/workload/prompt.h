// Prompts, compactly: Tokens is an immutable token sequence shared by reference (an arrival,
// the op that carries it and a recorded trace hold one buffer, not three copies), and a
// PromptRecipe describes a prompt as segments that expand deterministically to its tokens:
//
//   {"tokens": [t, ...]}                              literal tokens
//   {"rng": "<16 hex digits>", "n": N}                N tokens drawn from an Rng in that state,
//                                                     each below kPromptVocab (generated text)
//   {"rng": "<16 hex digits>", "n": N, "vocab": V}    the same, each below V (a small vocabulary)
//   {"out": rid, "n": N}                              output_token(rid, 0..N-1) (a turn's answer)
//   {"mooncake": [id, ...], "block_tokens": B, "len": L}
//                                                     Mooncake blocks (mooncake_block_tokens),
//                                                     concatenated and cut to L tokens
//
// A workload trace stores a recipe instead of the expanded prompt (a 15 K-token Mooncake prompt
// is its ~30 block ids), and a run expands each prompt only when its request arrives.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/types.h"

namespace kvsim::sim {

class JsonReader;

// The vocabulary of generated prompts (sim/workload/workload.cpp).
inline constexpr Token kPromptVocab = 50000;
// The longest prompt a recipe may describe (tokens): larger ones are refused before expansion.
inline constexpr int64_t kMaxPromptTokens = int64_t{1} << 31;

class Tokens {
 public:
  Tokens() = default;
  Tokens(std::vector<Token> v)  // NOLINT: implicit, a vector is a token sequence
      : p_(std::make_shared<std::vector<Token>>(std::move(v))) {}
  Tokens(std::initializer_list<Token> v) : Tokens(std::vector<Token>(v)) {}

  size_t size() const { return p_ ? p_->size() : 0; }
  bool empty() const { return size() == 0; }
  const Token* data() const { return p_ ? p_->data() : nullptr; }
  const Token* begin() const { return data(); }
  const Token* end() const { return data() + size(); }
  Token operator[](size_t i) const { return (*p_)[i]; }
  const std::vector<Token>& vec() const;
  operator const std::vector<Token>&() const { return vec(); }  // NOLINT

  // Copy-on-write edits (shrinking, fuzzers, parsers): other holders keep their tokens.
  void push_back(Token t) { mut().push_back(t); }
  void resize(size_t n) { mut().resize(n); }
  template <class It>
  void assign(It first, It last) {
    mut().assign(first, last);
  }
  // `pos` is a position in this sequence (begin()..end()).
  void insert(const Token* pos, size_t count, Token value) {
    const auto at = static_cast<size_t>(pos - begin());
    std::vector<Token>& v = mut();
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), count, value);
  }
  template <class It>
  void insert(const Token* pos, It first, It last) {
    const auto at = static_cast<size_t>(pos - begin());
    std::vector<Token>& v = mut();
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), first, last);
  }
  // True when the two share one buffer (tests: "shared, not copied").
  bool same_buffer(const Tokens& o) const { return p_ == o.p_; }

  friend bool operator==(const Tokens& a, const Tokens& b) { return a.vec() == b.vec(); }

 private:
  std::vector<Token>& mut();
  std::shared_ptr<std::vector<Token>> p_;  // never edited while shared (see mut)
};

struct PromptSegment {
  enum class Kind : uint8_t { kTokens, kRng, kOutputs, kMooncake };
  Kind kind = Kind::kTokens;
  uint64_t value = 0;          // kRng: the generator state; kOutputs: rid; kMooncake: block_tokens
  int64_t n = 0;               // tokens this segment contributes
  std::vector<int64_t> items;  // kTokens: the tokens; kMooncake: the block ids
  int64_t vocab = kPromptVocab;  // kRng: tokens are drawn below this

  friend bool operator==(const PromptSegment&, const PromptSegment&) = default;
};

using PromptRecipe = std::vector<PromptSegment>;

int64_t recipe_length(const PromptRecipe& recipe);
// The recipe of the first `n` tokens of `recipe` (a fork of a cached sequence at any offset):
// each segment kind expands to a prefix of itself when cut, so no new kind is needed.
PromptRecipe recipe_prefix(const PromptRecipe& recipe, int64_t n);
// The tokens of a recipe (appended to `out`).
void expand_recipe(const PromptRecipe& recipe, std::vector<Token>& out);
Tokens expand_recipe(const PromptRecipe& recipe);

nlohmann::json recipe_json(const PromptRecipe& recipe);
// Parses the array `j` (field `field` of the line `where`); every problem is an InputError
// naming the line and the segment's field, and lengths are checked before anything expands.
PromptRecipe recipe_from_json(const nlohmann::json& j, const std::string& where,
                              const std::string& field);

}  // namespace kvsim::sim
