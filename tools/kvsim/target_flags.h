// --target / --sglang-src: which cache `run`, `replay`, `shrink` and `hunt` drive
// (docs/sglang-hunt.md). kvsim's core unless --target sglang names SGLang's own cache, loaded from
// --sglang-src (a source tree, "installed", or "bundle:<tag>").
#pragma once

#include <string>

#include "sim/model/target.h"

namespace kvsim::tools {

struct TargetFlags {
  std::string target;         // "" = not given (kvsim, or what a trace recorded)
  std::string sglang_src;     // "" = not given
  bool differential = false;  // --differential: kvsim's core beside SGLang's cache, compared
};

// The flags are declared in main.cpp (the one file that compiles CLI11).

// The target the flags name; with `recorded` (a trace's header), the flags override what it
// recorded: --sglang-src alone replays an SGLang trace against another tree. Throws InputError
// for --target sglang without a source, or --sglang-src or --differential with --target kvsim.
// A trace recorded with --differential replays and shrinks as one without the flag.
sim::Target resolve_target(const TargetFlags& flags, const sim::Target& recorded = {});

}  // namespace kvsim::tools
