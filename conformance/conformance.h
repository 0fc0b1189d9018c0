// The component conformance kit, public entry point: what a component in another repository
// includes to run the same properties as the full, SWA, Mamba and example components.
//
//   #include "conformance/conformance.h"   // installed: <prefix>/include/kvsim/conformance/
//
//   namespace kc = kvsim::conformance;
//   const bool registered = [] {
//     kc::register_component_kit({my_component_under_test()}, "my_kit_tests");
//     return true;
//   }();
//   // link kvsim::conformance and GTest::gtest_main; every case is then an ordinary test:
//   //   Components/ComponentKit.LockSymmetry/<name>, .../Accounting/<name>, ...
//
// A ComponentUnderTest (kit.h) names the component, the slot its values live in, a factory
// for a KitSubject (the tree hosting it plus whatever allocates, copies and checks its values;
// the kit's shapes use pages of kKitPageSize tokens) and the nodes a load-back reads.
// hicache_subject() builds a subject for a component HiCache hosts; ExampleCache
// (example_cache.h) is the model for a host of one it does not. docs/new-component.md walks
// through the example; examples/external-component/ builds one against the installed package.
#pragma once

#include <string>
#include <vector>

#include "conformance/kit.h"

namespace kvsim::conformance {

// The page size, in tokens, of every shape the properties generate.
inline constexpr int32_t kKitPageSize = 4;

// Registers, for every component, the six properties (LockSymmetry, Accounting,
// EvictionSafety, LoadBackAnchoring, TransferResolution, ContentAcrossTiers) as GoogleTest
// cases "<suite>.<Property>/<component name>". Call before RUN_ALL_TESTS (a namespace-scope
// initializer in a test source works with gtest_main). `binary` names the test executable in
// the replay line a failure prints.
void register_component_kit(const std::vector<ComponentUnderTest>& components,
                            const std::string& binary,
                            const std::string& suite = "Components/ComponentKit");

}  // namespace kvsim::conformance
