// kvsim.Lock: a lock taken by RadixTree.lock, opaque but for its node and delta.
#include <string>

#include "python/src/bindings.h"
#include "python/src/py_lock.h"

namespace py = pybind11;

namespace kvsim::python {

void bind_lock(py::module_& m) {
  py::class_<PyLock>(m, "Lock", "A lock taken by RadixTree.lock; pass it back to unlock.")
      .def_property_readonly("node", [](const PyLock& l) { return l.node; })
      .def_property_readonly(
          "delta", [](const PyLock& l) { return l.delta; },
          "change of evictable_size() the lock made (<= 0)")
      .def("__repr__",
           [](const PyLock& l) { return "<kvsim.Lock node=" + std::to_string(l.node) + ">"; });
}

}  // namespace kvsim::python
