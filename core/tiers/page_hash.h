// The page-hash chain that names KV pages in storage (SGLang HiCache's L3 key scheme, with the
// namespace seed it shipped after its snapshot).
//
// Contract:
//  1. hash_page(prev, page) = SHA-256(prev ‖ each token id of the page as little-endian uint32).
//     Token ids are reinterpreted as uint32 (so -1 encodes as ff ff ff ff).
//  2. The chain of a root-level page starts from namespace_seed(ns) = SHA-256("kvsim-ns" ‖ ns as
//     little-endian u64), never from "no digest": equal tokens in different namespaces never
//     share a storage key (the cross-tenant fix, SGLang #38577).
//  3. hash_pages(prev, tokens, page_size)[k] = hash_page(hash_pages(...)[k-1], page k), with
//     [−1] = prev. Hence the chain is split-invariant: hashing a run in one go equals hashing
//     two page-aligned halves with the last digest of the first carried over.
//  4. Pure and deterministic; the byte encoding is part of the trace and on-disk format — do not
//     change it (tests pin golden digests).
//  5. Programmer errors (KV_ASSERT): an empty page; page_size <= 0; a token run that is not a
//     whole number of pages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace kvsim {

// PageDigest (core/common/types.h) is the page key: std::array<uint8_t, 32>.
PageDigest namespace_seed(Namespace ns);
PageDigest hash_page(const PageDigest& prev, std::span<const Token> page_tokens);
// One digest per page of `tokens` (a whole number of pages), chained from `prev`.
std::vector<PageDigest> hash_pages(const PageDigest& prev, std::span<const Token> tokens,
                                   int32_t page_size);
// 64 lowercase hex digits.
std::string to_hex(const PageDigest& digest);

}  // namespace kvsim
