// The parts of the kvsim._core module, each bound by its own file and called in this order
// from module.cpp's PYBIND11_MODULE (after the exception types are registered).
#pragma once

#include <pybind11/pybind11.h>

namespace kvsim::python {

// _close_recordings, _flush_recordings (bind_recording.cpp).
void bind_recording(pybind11::module_& m);
// kvsim.Lock (bind_lock.cpp).
void bind_lock(pybind11::module_& m);
// kvsim.RadixTree (bind_radix_tree.cpp).
void bind_radix_tree(pybind11::module_& m);

}  // namespace kvsim::python
