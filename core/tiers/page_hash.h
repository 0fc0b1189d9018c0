// The page-hash chain that names KV pages in storage.
//
// page k's key = SHA-256(previous digest ‖ the page's token ids as little-endian uint32).
// The chain of a root-level page starts from namespace_seed(ns) = SHA-256("kvsim-ns" ‖ ns as
// little-endian u64), so equal tokens in different namespaces never share a storage key (the
// cross-tenant fix SGLang shipped after its snapshot). The chain is split-invariant: hashing a
// run in one go equals hashing its page-aligned halves with the digest carried over.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace kvsim {

PageDigest namespace_seed(Namespace ns);
PageDigest hash_page(const PageDigest& prev, std::span<const Token> page_tokens);
// One digest per page of `tokens` (a whole number of pages), chained from `prev`.
std::vector<PageDigest> hash_pages(const PageDigest& prev, std::span<const Token> tokens,
                                   int32_t page_size);
std::string to_hex(const PageDigest& digest);

}  // namespace kvsim
