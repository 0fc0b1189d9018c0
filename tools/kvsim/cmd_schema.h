// `kvsim schema`: the scenario format's JSON Schema, or (--markdown) docs/scenario-reference.md,
// generated from the parser's field table (sim/config/scenario_fields.h).
#pragma once

namespace kvsim::tools {

struct SchemaCommand {
  bool markdown = false;
};
int schema_command(const SchemaCommand& c);

}  // namespace kvsim::tools
