// The project's instantiations of the component conformance kit (conformance/properties.cpp):
// the three components HiCache hosts, on HiCache over the CPU backend, and the example
// component of docs/new-component.md on its tree-level host. The same registration call is
// what a component in another repository makes (examples/external-component/).
//
// Run:   ctest --test-dir build/<dir> -R conformance
//        build/<dir>/tests/kvsim_conformance_tests --gtest_filter='*/ComponentKit.*/Example'
#include "conformance/conformance.h"

namespace kvsim::conformance {
namespace {

[[maybe_unused]] const bool kRegistered = [] {
  register_component_kit({full_component_under_test(), swa_component_under_test(),
                          mamba_component_under_test(), example_component_under_test()},
                         "kvsim_conformance_tests");
  return true;
}();

}  // namespace
}  // namespace kvsim::conformance
