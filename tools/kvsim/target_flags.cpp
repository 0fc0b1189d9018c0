#include "tools/kvsim/target_flags.h"

#include "sim/base/json_reader.h"

namespace kvsim::tools {

sim::Target resolve_target(const TargetFlags& flags, const sim::Target& recorded) {
  sim::Target t = recorded;
  if (!flags.target.empty()) {
    t.kind = sim::target_kind_from_string(flags.target, "--target");
    if (t.kind != recorded.kind) t.sglang_commit.clear();
  } else if (!flags.sglang_src.empty()) {
    t.kind = sim::Target::Kind::kSglang;  // --sglang-src alone means SGLang's cache
  }
  if (t.kind == sim::Target::Kind::kKvsim) {
    if (flags.differential) {
      throw sim::InputError(
          "--differential: only with --target sglang (it runs kvsim's core beside SGLang's "
          "cache; the target is kvsim)");
    }
    if (!flags.sglang_src.empty()) {
      throw sim::InputError("--sglang-src: only with --target sglang (the target is kvsim)");
    }
    return sim::Target{};
  }
  if (!flags.sglang_src.empty() && flags.sglang_src != t.sglang_src) {
    t.sglang_src = flags.sglang_src;
    t.sglang_commit.clear();  // the driver reports the commit it loads
  }
  if (flags.differential) t.differential = true;
  if (t.sglang_src.empty()) {
    throw sim::InputError(
        "--target sglang: --sglang-src is required (an SGLang source tree, 'installed', or "
        "'bundle:<tag>')");
  }
  return t;
}

}  // namespace kvsim::tools
