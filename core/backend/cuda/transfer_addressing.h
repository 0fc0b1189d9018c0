// The address arithmetic of the KV transfer kernel, as plain C++17 usable on host and device:
// the kernel (transfer_kernels.cu) runs kv_word() for every 8-byte word of a transfer, and
// host code (tests) can run the very same function to check the kernel's arithmetic without a
// GPU.
//
// A transfer moves, for each layer in [layer_begin, layer_end) and each i < count, item
// (layer, src_indices[i]) of the source pool to (layer, dst_indices[i]) of the destination
// pool (backend.h KVTransfer). Items are words_per_item 8-byte words. The flat word number
// `flat` in [0, kv_total_words) is decomposed word-fastest, then i, then layer, so
// consecutive threads copy consecutive words of one item (coalesced).
//
// Invariants:
//  1. kv_word() returns true only with src < src pool words and dst < dst pool words;
//  2. an index outside [0, slot_count) is reported (bad_side, bad_index), never addressed.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KVSIM_HD __host__ __device__
#else
#define KVSIM_HD
#endif

namespace kvsim {

// Layout codes; they equal the values of KVLayout (checked in cuda_backend_transfer.cpp).
constexpr uint8_t kKernelLayerFirst = 0;  // [layer][slot][item]
constexpr uint8_t kKernelPageFirst = 1;   // [slot][layer][item]

struct KvTransferArgs {
  const uint64_t* src_words = nullptr;  // pool base addresses (device or mapped pinned)
  uint64_t* dst_words = nullptr;
  const int64_t* src_indices = nullptr;  // `count` slot indices each
  const int64_t* dst_indices = nullptr;
  int64_t src_slots = 0;
  int64_t dst_slots = 0;
  int32_t src_layers = 0;
  int32_t dst_layers = 0;
  uint8_t src_layout = kKernelLayerFirst;
  uint8_t dst_layout = kKernelLayerFirst;
  uint64_t words_per_item = 0;
  uint64_t count = 0;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;
  uint64_t serial = 0;  // names the transfer in fault reports
};

// Where one word goes, or which index was out of range.
struct KvWord {
  uint64_t src = 0;  // word offsets from the pool bases
  uint64_t dst = 0;
  int32_t bad_side = 0;  // 0 none, 1 source index, 2 destination index
  int64_t bad_index = 0;
  uint64_t bad_position = 0;  // i of the bad index
};

KVSIM_HD inline uint64_t kv_total_words(const KvTransferArgs& a) {
  const int32_t layers = a.layer_end - a.layer_begin;
  return layers <= 0 ? 0 : static_cast<uint64_t>(layers) * a.count * a.words_per_item;
}

// The item number of (layer, slot) in a pool: its byte offset is that times the item bytes.
KVSIM_HD inline uint64_t kv_item(uint8_t layout, int64_t slots, int32_t layers, int32_t layer,
                                 int64_t slot) {
  return layout == kKernelLayerFirst ? static_cast<uint64_t>(layer) * static_cast<uint64_t>(slots) +
                                           static_cast<uint64_t>(slot)
                                     : static_cast<uint64_t>(slot) * static_cast<uint64_t>(layers) +
                                           static_cast<uint64_t>(layer);
}

KVSIM_HD inline bool kv_word(const KvTransferArgs& a, uint64_t flat, KvWord* out) {
  const uint64_t word = flat % a.words_per_item;
  const uint64_t rest = flat / a.words_per_item;
  const uint64_t i = rest % a.count;
  const int32_t layer = a.layer_begin + static_cast<int32_t>(rest / a.count);
  const int64_t src_slot = a.src_indices[i];
  const int64_t dst_slot = a.dst_indices[i];
  if (src_slot < 0 || src_slot >= a.src_slots || dst_slot < 0 || dst_slot >= a.dst_slots) {
    const bool src_bad = src_slot < 0 || src_slot >= a.src_slots;
    out->bad_side = src_bad ? 1 : 2;
    out->bad_index = src_bad ? src_slot : dst_slot;
    out->bad_position = i;
    return false;
  }
  out->src =
      kv_item(a.src_layout, a.src_slots, a.src_layers, layer, src_slot) * a.words_per_item + word;
  out->dst =
      kv_item(a.dst_layout, a.dst_slots, a.dst_layers, layer, dst_slot) * a.words_per_item + word;
  out->bad_side = 0;
  return true;
}

}  // namespace kvsim
