// PyLock: a lock held through the binding (kvsim.Lock), the core's LockRecord kept opaque to
// Python, with what unlock needs to refuse a foreign Lock and to name the lock in a recording.
#pragma once

#include <cstdint>

#include "core/tree/radix_tree.h"

namespace kvsim::python {

struct PyLock {
  LockRecord record;
  uint64_t tree = 0;  // the serial of the tree that took it: another tree refuses it
  NodeId node = 0;
  int64_t call = -1;  // index of the lock call in the recording, -1 when not recorded
  int64_t delta = 0;  // change of evictable_size() the lock made (<= 0), SGLang's delta
};

}  // namespace kvsim::python
