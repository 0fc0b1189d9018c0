// Slot arrays across the binding (slot_arrays.h). The scans are KVSIM_SIMD_CLONES: they run
// over every slot of an insert's value.
#include "python/src/slot_arrays.h"

#include <utility>

#include "core/common/simd_clones.h"

namespace py = pybind11;

namespace kvsim::python {
namespace {

// The OR of n slot indices (negative: some index is).
KVSIM_SIMD_CLONES int64_t or_all(const int64_t* v, size_t n) {
  int64_t all = 0;
  for (size_t i = 0; i < n; ++i)
    all |= v[i];
  return all;
}

}  // namespace

py::array_t<int64_t> to_numpy(std::vector<int64_t>&& v) {
  auto* owner = new std::vector<int64_t>(std::move(v));
  py::capsule free_when_done(owner, [](void* p) { delete static_cast<std::vector<int64_t>*>(p); });
  return py::array_t<int64_t>(static_cast<py::ssize_t>(owner->size()), owner->data(),
                              free_when_done);
}

py::array_t<int64_t> to_numpy(SlotBuffer&& b) {
  int64_t* data = b.data.release();
  py::capsule owner(data, [](void* p) { delete[] static_cast<int64_t*>(p); });
  return py::array_t<int64_t>(static_cast<py::ssize_t>(b.size), data, owner);
}

KVSIM_SIMD_CLONES SlotScan scan_slots(const int64_t* v, size_t n, size_t page) {
  SlotScan scan;
  if (page <= 1 || n % page != 0) {
    scan.all_or = or_all(v, n);
    return scan;
  }
  uint64_t diff = 0;
  int64_t all = 0;
  for (size_t k = 0; k < n; k += page) {
    const int64_t first = v[k];
    const int64_t* p = v + k;
    for (size_t j = 0; j < page; ++j) {
      all |= p[j];
      diff |= static_cast<uint64_t>((p[j] - static_cast<int64_t>(j)) ^ first);
    }
  }
  scan.all_or = all;
  scan.page_runs = diff == 0;
  return scan;
}

IndexVector device_value(std::span<const SlotIndex> slots, int32_t page_size, bool page_runs) {
  if (page_runs && page_size > 1) {
    const auto page = static_cast<size_t>(page_size);
    std::vector<SlotIndex> firsts(slots.size() / page);
    for (size_t k = 0; k < firsts.size(); ++k)
      firsts[k] = slots[k * page];
    return IndexVector::pages(Tier::kDevice, page_size, std::move(firsts));
  }
  return IndexVector(Tier::kDevice, std::vector<SlotIndex>(slots.begin(), slots.end()));
}

}  // namespace kvsim::python
