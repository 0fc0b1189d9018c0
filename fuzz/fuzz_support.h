// Shared plumbing of the kvsim fuzz targets (fuzz/*_fuzzer.cpp): where a finding's op trace
// goes, how it is named, and how it is reported.
//
// A target that sees a simulator violation calls report_violation(), which writes the ops applied
// so far as a kvsim op trace next to libFuzzer's crash file, prints the invariant and the command
// that replays it, and aborts — so libFuzzer records the input as a crash and the trace replays
// the same violation without the fuzzer:
//
//   <dir>/kvsim-<target>-<sha1 of the input>.trace.jsonl   (libFuzzer writes <dir>/crash-<sha1>)
//
// <dir> is the folder of -artifact_prefix when the fuzzer was given one, else
// $KVSIM_FUZZ_TRACE_DIR, else the current directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "sim/trace/trace.h"

namespace kvsim::fuzz {

// Called from LLVMFuzzerInitialize with the fuzzer's argv: remembers -artifact_prefix.
void init_trace_dir(int argc, char** argv);
// The folder a finding's trace is written to (see above).
std::string trace_dir();
// Lower-case hex SHA-1 of the input: the name libFuzzer gives the crash file.
std::string sha1_hex(const uint8_t* data, size_t size);

// Writes `trace` (whose violation is set), prints the invariant and the replay command, aborts.
// With `workload` (sim_fuzzer), also writes kvsim-<target>-<sha1>.workload.jsonl: it replays
// through the scheduler, so it reproduces violations the scheduler itself finds ("liveness"),
// which an op trace — the ops without the scheduler — cannot.
[[noreturn]] void report_violation(const char* target, const uint8_t* data, size_t size,
                                   const sim::OpTrace& trace,
                                   const sim::WorkloadTrace* workload = nullptr);

// A failed property of a parser target (a round trip that does not hold): prints and aborts.
[[noreturn]] void report_property(const char* target, const std::string& what);

// Known findings (fuzz/findings/README.md), stepped over so that a campaign — and the CI smoke
// run — keeps looking for new bugs instead of re-finding these within seconds. KVSIM_FUZZ_STRICT=1
// turns every one of them back into a crash (to reproduce it, or to check a fix). Each mask names
// its finding; delete the mask with the fix.
bool strict();
// Finding F2: parse_json lets nlohmann's out_of_range 406 ("number overflow", e.g. 1e999)
// escape instead of an InputError. True when `e` is that exception and masks are on.
bool known_json_number_overflow(const std::exception& e);

}  // namespace kvsim::fuzz
