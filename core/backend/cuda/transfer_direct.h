// The "direct" KV transfer path: the byte runs of a KVTransfer, planned on the host from the
// index values, each run one cudaMemcpyAsync (cuda_backend_transfer.cpp issues them).
//
// Runs are produced in the order that lets neighbours coalesce: layer by layer when both
// pools are layer-first (consecutive slots of one layer are adjacent), slot by slot otherwise
// (all layers of a page-first slot are adjacent). A run that starts where the previous one
// ended, on both sides, is merged into it. So a contiguous index range costs one copy per
// layer (layer-first) or, page-first with all layers, one copy in all.
//
// Invariants:
//  1. the runs cover exactly the bytes the kernel path moves: every (layer, i) item once;
//  2. every run lies inside both pools' total_bytes(); an index outside its pool yields a
//     problem string and no runs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"

namespace kvsim {

struct CopyRun {
  uint64_t src_offset = 0;  // bytes from the source pool's base
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

// Plans `transfer`'s copies given its `count` source and destination indices. Returns "" and
// fills `runs`, or the first out-of-range index (then `runs` is empty).
std::string plan_direct_runs(const KVTransfer& transfer, std::span<const int64_t> src_indices,
                             std::span<const int64_t> dst_indices, std::vector<CopyRun>* runs);

}  // namespace kvsim
