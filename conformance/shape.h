// Shape: a request's tokens, described so that a shrunk counterexample stays readable and
// requests share prefixes often. Page i of a shape holds tokens that depend only on
// (i, branches[i]), so two shapes that agree on their first k branches share their first k
// pages — a radix-tree prefix — and diverge on page k (a split point).
//
//   toks(ns, {b0, b1, ...}, tail)  — the tokens of a shape, as printed in counterexamples.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace kvsim::conformance {

inline constexpr int kBranches = 3;

struct Shape {
  Namespace ns = 1;
  std::vector<uint8_t> branches;  // one per page, each in [0, kBranches)
  uint8_t tail = 0;               // unaligned tokens after the last page (< page size)
  friend bool operator==(const Shape&, const Shape&) = default;
};

// The tokens of a shape with pages of `page_size` tokens.
std::vector<Token> tokens_of(const Shape& shape, int32_t page_size);
// "toks(1, {0,2,1}, 2)"
std::string show(const Shape& shape);
void showValue(const Shape& shape, std::ostream& os);

// Shapes of 1..max_pages pages in namespaces 1..namespaces, low branches more likely,
// whatever RapidCheck's current size.
rc::Gen<Shape> gen_shape(int max_pages, int32_t page_size, int namespaces = 1);

}  // namespace kvsim::conformance
