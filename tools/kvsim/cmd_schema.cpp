#include "tools/kvsim/cmd_schema.h"

#include <cstdio>
#include <string>

#include "sim/config/scenario_fields.h"

namespace kvsim::tools {

int schema_command(const SchemaCommand& c) {
  const std::string text =
      c.markdown ? sim::scenario_reference_markdown() : sim::scenario_json_schema().dump(2) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace kvsim::tools
