// scenario_parser_fuzzer: bytes → parse_json + parse_scenario (what `kvsim run <file>` does).
//
// Properties: any input gives a Scenario or an InputError — never a crash, a hang, another
// exception or an unbounded allocation (the parser allocates nothing sized by a field's value);
// and a parsed scenario round-trips: parse_scenario(to_json(s)) serializes to the same JSON
// (what a trace header relies on to replay a run with the configuration that recorded it).
#include <cstdint>
#include <exception>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/config/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  sim::Scenario s;
  try {
    s = sim::parse_scenario(sim::parse_json(text, "fuzz.json"), "fuzz.json");
  } catch (const sim::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    if (!fuzz::known_json_number_overflow(e)) throw;  // anything else is a crash
    return 0;
  }
  const nlohmann::json once = sim::to_json(s);
  nlohmann::json twice;
  try {
    twice = sim::to_json(sim::parse_scenario(once, "to_json"));
  } catch (const sim::InputError& e) {
    fuzz::report_property("scenario_parser",
                          std::string("to_json of a parsed scenario does not parse: ") + e.what());
  }
  if (once != twice) {
    fuzz::report_property("scenario_parser", "scenario does not round-trip:\n  " + once.dump() +
                                                 "\n  " + twice.dump());
  }
  return 0;
}
