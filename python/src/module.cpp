// kvsim._core: the Python binding of kvsim's radix tree (pybind11).
//
// What it binds, as the core has it: RadixTree (match_prefix / insert / lock / unlock, the
// device-victim order, sizes, sanity_check) with the slots owned by the caller, the way SGLang's
// RadixCache holds indices into a token_to_kv_pool allocator it does not own. evict() is the
// loop HiCache runs for a device-only tree (next_device_victim + remove_device_leaf), returning
// the freed slots for the caller's allocator.
//
// Rules of the binding (docs/sglang.md, "The Python module"):
//  - index arrays cross without copies where the core allows it: a match or an evict hands the
//    core's freshly built index vector to numpy (the array owns it through a capsule); token
//    buffers are read in place, int32 and int64 alike (the core compares wide ids without a
//    narrowed copy); an insert's ids are range-checked against kvsim's 32-bit Token;
//  - calls that do real work release the GIL; one mutex per tree serialises threads, and
//    everything a call returns (node ids, slot arrays) is read while that mutex is held: another
//    thread's evict may free a result's node the moment the mutex is released;
//  - the throwing assertion handler is per thread in the core: every call installs it on the
//    thread that makes the call, so a core assertion raises on any thread, not only the
//    importing one;
//  - a bad argument raises ValueError / TypeError before the core sees it; a violated core
//    assertion raises kvsim.CoreAssertionError with the core's message, and that tree is
//    poisoned: every later call raises kvsim.PoisonedError (its state is not trusted any more);
//  - a call recorder (python/src/recorder.h) sees every call when recording is on.
//
// The files: this one (the module and its exception types); bind_*.cpp (one per bound class or
// group, declared in bindings.h); py_tree.h (RadixTree's C++ side) and py_lock.h (Lock's);
// int_buffer.h and slot_arrays.h (arrays in and out); recorder.h and recording_registry.h (the
// call recorder and the process-wide tables of recordings).
#include <pybind11/pybind11.h>

#include <exception>
#include <limits>
#include <stdexcept>

#include "core/common/assert.h"
#include "core/common/types.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  using namespace kvsim::python;
  m.doc() = "kvsim's radix-tree core (see docs/sglang.md)";
  // Core assertions throw inside this process: a violation raises instead of aborting python.
  kvsim::set_assert_handler(&kvsim::throwing_assert_handler);

  static py::exception<std::runtime_error> base(m, "KvsimError", PyExc_RuntimeError);
  static py::exception<CoreAssertion> core_assertion(m, "CoreAssertionError", base.ptr());
  static py::exception<Poisoned> poisoned(m, "PoisonedError", base.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CoreAssertion& e) {
      PyErr_SetString(core_assertion.ptr(), e.what());
    } catch (const Poisoned& e) {
      PyErr_SetString(poisoned.ptr(), e.what());
    } catch (const CallError& e) {
      PyErr_SetString(base.ptr(), e.what());
    }
  });
  bind_recording(m);
  m.attr("TOKEN_MIN") = std::numeric_limits<kvsim::Token>::min();
  m.attr("TOKEN_MAX") = std::numeric_limits<kvsim::Token>::max();
  bind_lock(m);
  bind_radix_tree(m);
}
