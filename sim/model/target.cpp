#include "sim/model/target.h"

#include "sim/base/json_reader.h"

namespace kvsim::sim {

std::string_view to_string(Target::Kind kind) {
  return kind == Target::Kind::kSglang ? "sglang" : "kvsim";
}

Target::Kind target_kind_from_string(const std::string& s, const std::string& where) {
  if (s == "kvsim") return Target::Kind::kKvsim;
  if (s == "sglang") return Target::Kind::kSglang;
  throw InputError(where + ": target \"" + s + "\" is not one of kvsim, sglang");
}

nlohmann::json to_json(const Target& t) {
  nlohmann::json j = {{"kind", to_string(t.kind)}};
  if (t.kind == Target::Kind::kSglang) {
    j["sglang_src"] = t.sglang_src;
    if (!t.sglang_commit.empty()) j["sglang_commit"] = t.sglang_commit;
    if (t.differential) j["differential"] = true;
  }
  return j;
}

Target target_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader in(j, where, "target");
  Target t;
  t.kind = target_kind_from_string(in.choice("kind", "kvsim", {"kvsim", "sglang"}), where);
  if (t.kind == Target::Kind::kSglang) {
    t.sglang_src = in.required_string("sglang_src");
    t.sglang_commit = in.string("sglang_commit", "");
    t.differential = in.boolean("differential", false);
  }
  in.finish();
  return t;
}

}  // namespace kvsim::sim
