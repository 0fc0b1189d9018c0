// Target: which cache a run hunts. kvsim's core (the default) runs in process; SGLang's own
// Python cache runs in a driver process (docs/sglang-hunt.md) loaded from `sglang_src`: a source
// tree, "installed", or a tag of the SGLang bundle ("bundle:sglang-27659ea8c8"). An op trace of
// an SGLang run names the tree and its commit, so a replay runs the same code.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::sim {

struct Target {
  enum class Kind : uint8_t { kKvsim = 0, kSglang = 1 };
  Kind kind = Kind::kKvsim;
  std::string sglang_src;     // kSglang: what the driver loads (resolved by the driver)
  std::string sglang_commit;  // kSglang: the commit the driver reported (traces record it)
  std::string python;         // kSglang: the interpreter ("" = $KVSIM_PYTHON or /usr/bin/python3)
  // kSglang: kvsim's core runs the same ops beside SGLang's cache and every op's decisions are
  // compared (sim/model/differential_cache.h); the first difference is a violation.
  bool differential = false;
  bool is_kvsim() const { return kind == Kind::kKvsim; }
  bool operator==(const Target&) const = default;
};

std::string_view to_string(Target::Kind kind);
// {"kind": "sglang", "sglang_src": ..., "sglang_commit": ..., "differential": true (only when
// on)}; kvsim's target is {"kind":"kvsim"}.
nlohmann::json to_json(const Target& t);
// Throws InputError naming `where` and the field.
Target target_from_json(const nlohmann::json& j, const std::string& where);
// "kvsim" or "sglang" (flag values); throws InputError naming `where` otherwise.
Target::Kind target_kind_from_string(const std::string& s, const std::string& where);

}  // namespace kvsim::sim
