// ExampleCache: the host of the example component (example_component.h) — what HiCache is to
// the full, SWA and Mamba components, cut down to what the conformance kit drives: a radix
// tree with the full-attention component and PageChecksumComponent, slot allocators for the
// full KV (device and host) and the checksum pool, and synchronous copies between tiers.
//
// Content: instead of KV bytes, every full-attention slot holds a 64-bit tag, token_tag(), a
// pure function of (namespace, token prefix); every checksum slot holds page_checksum() of
// its page. values_error() compares a node's slots with both oracles.
//
// Protocol (one thread, nothing asynchronous): serve() runs a whole request (match, lock,
// compute the uncached pages, insert, free duplicates, give checksums to the pages it
// computed, unlock), so between calls no slot is held by a request and every allocated slot is
// owned by exactly one tree node — sanity_check() verifies that ("example.ownership").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "conformance/example_component.h"
#include "core/pools/paged_allocator.h"
#include "core/tree/radix_tree.h"

namespace kvsim::conformance {

// The full-attention oracle of ExampleCache: the tag of the token at `position`.
uint64_t token_tag(Namespace ns, std::span<const Token> tokens, size_t position);

struct ExampleCacheOptions {
  int32_t page_size = 4;
  int64_t device_tokens = 64;
  int64_t host_tokens = 128;
  int64_t checksum_device_slots = 12;
  int64_t checksum_host_slots = 32;
  ComponentType slot = kExampleSlot;
};

class ExampleCache {
 public:
  explicit ExampleCache(ExampleCacheOptions options);

  RadixTree& tree() { return tree_; }
  const RadixTree& tree() const { return tree_; }
  ComponentType slot() const { return options_.slot; }
  const ExampleCacheOptions& options() const { return options_; }
  PagedSlotAllocator& device_slots() { return device_slots_; }
  PagedSlotAllocator& host_slots() { return host_slots_; }
  ChecksumPool& checksums() { return checksums_; }

  // A whole request; the unaligned tail is computed and dropped, as a finishing request's is.
  void serve(Namespace ns, std::span<const Token> tokens);
  // Backs `node` up to host (full KV and, if present, its checksums); returns tokens backed
  // up, 0 when refused (parent not backed up, or no host room).
  int64_t backup(TreeNode& node);
  int64_t evict(int64_t tokens);           // device tokens freed
  int64_t evict_checksums(int64_t slots);  // checksum device slots freed (tombstones)
  int64_t evict_host(int64_t tokens);      // host tokens freed
  // Loads the evicted segment ending at `best_match_node` and, when it has none on device, its
  // checksums; false when nothing was needed or there was no room (nothing changed then).
  bool load_back(TreeNode& best_match_node);

  void sanity_check(SanityReport& report) const;
  // "" when the `type` values (device and host) of `node` equal the oracle.
  std::optional<std::string> values_error(const TreeNode& node, ComponentType type);
  // Set when any allocator has an allocated slot (after everything was evicted: a leak).
  std::optional<std::string> leak_error() const;

 private:
  void evict_device_victim(TreeNode& victim);
  void free_released(const ReleasedSlots& released);
  void give_checksums(Namespace ns, std::span<const Token> tokens, TreeNode& last, size_t from);

  ExampleCacheOptions options_;
  RadixTree tree_;
  const PageChecksumComponent* component_ = nullptr;
  PagedSlotAllocator device_slots_;
  PagedSlotAllocator host_slots_;
  std::vector<uint64_t> device_tags_;
  std::vector<uint64_t> host_tags_;
  ChecksumPool checksums_;
};

}  // namespace kvsim::conformance
