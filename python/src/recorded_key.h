// PendingKey: the key of the call the recorder is writing, as the caller passed it (32-bit
// Tokens or wide int64 ids, read in place; valid until the call's finish), cut to 32-bit Tokens
// or hashed page by page where the recorder needs part of it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/common/types.h"
#include "core/tree/wide_ids.h"
#include "sim/trace/call_page_hash.h"

namespace kvsim::python {

struct PendingKey {
  const Token* narrow = nullptr;
  const int64_t* wide = nullptr;
  size_t size = 0;
  static PendingKey of(std::span<const Token> t) { return {t.data(), nullptr, t.size()}; }
  static PendingKey of(std::span<const int64_t> t) { return {nullptr, t.data(), t.size()}; }
  // [from, to) into dst as Tokens; false when a wide id does not fit (dst then holds the
  // truncated ids).
  bool copy(size_t from, size_t to, Token* dst) const {
    if (narrow != nullptr) {
      std::copy(narrow + from, narrow + to, dst);
      return true;
    }
    return wide == nullptr || narrow_wide_ids(wide + from, to - from, dst);
  }
  // The hashes of `pages` pages from `from` into out; false when a wide id does not fit
  // (out then holds the hashes of the cut ids).
  bool hash(size_t from, size_t pages, size_t page, uint64_t* out) const {
    if (narrow != nullptr) {
      sim::hash_token_pages(narrow + from, pages, page, out);
      return true;
    }
    return wide == nullptr || sim::hash_wide_pages(wide + from, pages, page, out);
  }
};

}  // namespace kvsim::python
