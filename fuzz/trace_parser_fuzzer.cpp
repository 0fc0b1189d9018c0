// trace_parser_fuzzer: bytes → read_trace_text (what `kvsim replay <trace>` reads first).
//
// Properties: any input gives a trace or an InputError — never a crash, a hang, another
// exception or an unbounded allocation (the parser allocates nothing sized by a field's value:
// a huge "n", "now" or "output_len" is only stored); a trace that parses is of one of the two
// kinds its header may name; and every op it holds round-trips through to_json/op_from_json.
// The trace is not replayed: its scenario may ask for pools of any size.
#include <cstdint>
#include <exception>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/json_reader.h"
#include "sim/op.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  sim::AnyTrace trace;
  try {
    trace = sim::read_trace_text(text, "fuzz.trace.jsonl");
  } catch (const sim::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    if (!fuzz::known_json_number_overflow(e)) throw;  // anything else is a crash
    return 0;
  }
  // Finding F3: a trace whose first line is blank is read without a header (kind "").
  const bool known_headerless = !fuzz::strict() && text.starts_with('\n') && trace.kind.empty();
  if (trace.kind != "workload" && trace.kind != "ops" && !known_headerless) {
    fuzz::report_property("trace_parser", "a trace parsed with kind \"" + trace.kind +
                                              "\" (no header line was read)");
  }
  for (const sim::Op& op : trace.ops.ops) {
    const nlohmann::json once = sim::to_json(op);
    nlohmann::json twice;
    try {
      twice = sim::to_json(sim::op_from_json(once, "to_json"));
    } catch (const sim::InputError& e) {
      fuzz::report_property("trace_parser",
                            std::string("to_json of a parsed op does not parse: ") + e.what());
    }
    if (once != twice) {
      fuzz::report_property("trace_parser",
                            "op does not round-trip: " + once.dump() + " vs " + twice.dump());
    }
  }
  return 0;
}
