// call_trace_parser_fuzzer: bytes → read_call_trace_text → replay_calls (what `kvsim replay`
// does with a recording of the Python module, docs/sglang.md "Recording").
//
// Properties: any input gives a call trace or an InputError — never a crash, a hang or another
// exception; a trace that parses ends with its footer (issue 29: a recording cut at a line
// boundary, or a header alone, is refused) whose call count is the calls it holds; its replay
// reaches a verdict (the text names it: "matches" or "DIFFERS FROM"). And it never "matches" a
// recording it does not hold: when a trace replays as matching, the same text without its
// footer must be refused, and without its last call line (footer kept) must be refused or not
// match.
//
// Inputs that name a binary sidecar ("blob") are skipped: the parser would read that file
// (an arbitrary path, "-" is standard input), which is the file system's surface, not the
// parser's.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_replay.h"

namespace {

using namespace kvsim;

// The trace, or nullopt when the parser refuses it as bad input (the only refusal allowed).
std::optional<sim::CallTrace> parse(const std::string& text) {
  try {
    return sim::read_call_trace_text(text, "fuzz.calls.jsonl");
  } catch (const sim::InputError&) {
    return std::nullopt;
  } catch (const std::exception& e) {
    if (!fuzz::known_json_number_overflow(e)) throw;  // anything else is a crash
    return std::nullopt;
  }
}

// The text's lines, without their newlines (blank ones kept, as the parser skips them).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string join_without(const std::vector<std::string>& lines, size_t skip) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i != skip) out += lines[i] + "\n";
  }
  return out;
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find("blob") != std::string::npos) return 0;
  const std::optional<sim::CallTrace> trace = parse(text);
  if (!trace) return 0;
  if (!trace->end) {
    fuzz::report_property("call_trace_parser", "a call trace without a footer parsed");
    return 0;
  }
  if (trace->end->calls != trace->calls.size()) {
    fuzz::report_property("call_trace_parser",
                          "a footer counting " + std::to_string(trace->end->calls) +
                              " calls parsed with " + std::to_string(trace->calls.size()));
  }
  const sim::CallReplay r = sim::replay_calls(*trace);
  const bool matches = sim::call_replay_matches(*trace, r);
  const std::string verdict = sim::call_replay_text("fuzz.calls.jsonl", *trace, r);
  if (verdict.find(matches ? "replay matches" : "replay DIFFERS FROM") == std::string::npos) {
    fuzz::report_property("call_trace_parser", "the verdict text does not say the verdict");
  }
  if (!matches) return 0;

  // A matching recording, cut: the footer is the last non-blank line.
  const std::vector<std::string> lines = lines_of(text);
  size_t footer = lines.size();
  while (footer > 0 && blank(lines[footer - 1]))
    --footer;
  if (footer == 0) return 0;
  --footer;
  if (parse(join_without(lines, footer))) {
    fuzz::report_property("call_trace_parser",
                          "the recording without its footer still parsed (it must be refused)");
  }
  size_t last_call = footer;
  while (last_call > 0 && blank(lines[last_call - 1]))
    --last_call;
  if (last_call <= 1 || trace->calls.empty()) return 0;  // header only before the footer
  --last_call;
  if (lines[last_call].find("\"op\"") == std::string::npos) return 0;  // a snapshot line
  if (const auto cut = parse(join_without(lines, last_call))) {
    if (sim::call_replay_matches(*cut, sim::replay_calls(*cut))) {
      fuzz::report_property("call_trace_parser",
                            "the recording without its last call still matches its footer");
    }
  }
  return 0;
}
