// trace_parser_fuzzer: bytes → read_trace_text → replay → shrink (what `kvsim replay <trace>`
// and `kvsim shrink` do with a file).
//
// Properties: any input gives a trace or an InputError — never a crash, a hang, another
// exception or an unbounded allocation (the parser allocates nothing sized by a field's value:
// a huge "n", "now" or "output_len" is only stored); a trace that parses is of one of the two
// kinds its header may name; and every op it holds round-trips through to_json/op_from_json.
// Then an op trace of at most 512 ops whose pools hold at most 2^16 pages and whose
// configuration and tokens pass the resource check (under a small limit, 64 MiB) is replayed
// as `kvsim replay` does (strictly from version 2): it reaches a verdict or a named problem,
// never a crash. A replay that fails is shrunk (a small budget),
// and the shrunk trace — only ops that apply, with its hash chain — must replay strictly,
// without a problem, to the same failure.
#include <cstdint>
#include <exception>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/resources.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/shrink.h"
#include "sim/model/op.h"
#include "sim/trace/trace.h"

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
  if (trace.kind != "ops" || trace.ops.ops.size() > 512) return 0;
  // A full check after every op walks every page: big pools would time the fuzzer out.
  const HiCacheOptions& c = trace.ops.scenario.cache;
  if ((c.device_tokens + c.host_tokens) / c.page_size > (int64_t{1} << 16)) return 0;
  try {
    sim::check_trace_memory(trace.ops, uint64_t{64} << 20, "fuzz.trace.jsonl:1");
  } catch (const sim::InputError&) {
    return 0;  // refused up front, as kvsim replay refuses it
  }
  const sim::ReplayReport rep =
      sim::replay_trace(trace.ops, {.stop_at_problem = trace.ops.version >= 2});
  if (rep.problem && sim::describe(trace.ops, *rep.problem).empty()) {
    fuzz::report_property("trace_parser", "a replay problem without a message");
  }
  if (!rep.result.violation || rep.problem) return 0;
  const sim::ShrinkResult shrunk = sim::shrink_trace(trace.ops, {.max_replays = 64});
  if (!shrunk.reproduced) {
    fuzz::report_property("trace_parser", "a failing replay (" + rep.result.violation->invariant +
                                              ") does not fail when shrink replays it");
  }
  const sim::ReplayReport again = sim::replay_trace(shrunk.trace, {.stop_at_problem = true});
  if (again.problem) {
    fuzz::report_property("trace_parser", "the shrunk trace does not replay strictly: " +
                                              sim::describe(shrunk.trace, *again.problem));
  }
  if (!again.result.violation ||
      !sim::same_failure(*rep.result.violation, *again.result.violation)) {
    fuzz::report_property("trace_parser", "the shrunk trace does not fail as the original (" +
                                              rep.result.violation->invariant + ")");
  }
  return 0;
}
