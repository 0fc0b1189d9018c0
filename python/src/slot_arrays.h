// Slot arrays across the binding: out, as int64 numpy arrays that own the core's storage (no
// copy); in, a caller's slots checked and put in the tree's form in one vectorised pass.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/pools/index_vector.h"

namespace kvsim::python {

// An int64 array that owns its storage through a capsule: no copy of the core's vector.
pybind11::array_t<int64_t> to_numpy(std::vector<int64_t>&& v);

// n slots in new, uninitialised storage (no zero fill: the expansion of page-granular indices
// writes every slot once), filled inside a call's run() (without the GIL for large calls) and
// then handed to numpy, which owns it.
struct SlotBuffer {
  std::unique_ptr<int64_t[]> data;
  size_t size = 0;

  template <typename Fill>
  static SlotBuffer filled(size_t n, Fill&& fill) {
    SlotBuffer b{std::make_unique_for_overwrite<int64_t[]>(n), n};
    fill(b.data.get());
    return b;
  }
};

pybind11::array_t<int64_t> to_numpy(SlotBuffer&& b);

// One vectorised pass over a value's slots: their OR (negative: some slot is) and whether every
// page of `page` slots holds consecutive slots (v[k*page + j] == v[k*page] + j).
struct SlotScan {
  int64_t all_or = 0;
  bool page_runs = false;
};
SlotScan scan_slots(const int64_t* v, size_t n, size_t page);

// The tree's form of a caller's slots: one entry per page when each page's slots are
// consecutive (what a paged allocator hands out: the tree then stores, slices and returns one
// index per page), else one per token. Same contents either way (IndexVector invariant 3).
IndexVector device_value(std::span<const SlotIndex> slots, int32_t page_size, bool page_runs);

}  // namespace kvsim::python
