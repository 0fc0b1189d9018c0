// The compiled-out form of the probes (KVSIM_PROBES=0): the macros still name-check, do not
// evaluate their condition and count nothing. Built here as one translation unit with the
// switch off beside the rest of the (probes-on) test binary.
#undef KVSIM_PROBES
#define KVSIM_PROBES 0
#include "core/common/probe.h"

#include <gtest/gtest.h>

namespace kvsim::probes {
namespace {

TEST(ProbeOff, MacrosCompileToNothing) {
  static_assert(!kEnabled);
  reset();
  int evaluated = 0;
  KV_PROBE(tree_split_locked);
  KV_PROBE_IF((++evaluated, true), tree_split_locked);
  EXPECT_EQ(evaluated, 0);
  for (const Count& c : snapshot())
    EXPECT_EQ(c.count, 0u) << c.name;
}

}  // namespace
}  // namespace kvsim::probes
