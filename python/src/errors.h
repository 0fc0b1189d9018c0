// The binding's exception types, raised by PyTree's calls and translated in module.cpp:
// CoreAssertion -> kvsim.CoreAssertionError, Poisoned -> kvsim.PoisonedError, CallError ->
// kvsim.KvsimError (the base of both).
#pragma once

#include <stdexcept>

namespace kvsim::python {

// Raised (as kvsim.CoreAssertionError) when a core KV_ASSERT fails inside a call.
struct CoreAssertion : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Raised (as kvsim.PoisonedError) by every call on a tree whose earlier call failed an assertion.
struct Poisoned : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A call the tree cannot make sense of (KvsimError), e.g. a dec_lock_ref with no lock to release.
struct CallError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kvsim::python
