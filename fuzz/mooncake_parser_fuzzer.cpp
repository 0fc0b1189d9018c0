// mooncake_parser_fuzzer: bytes → read_mooncake_text (the Mooncake trace importer's parser).
//
// Properties: any input gives records or an InputError — never a crash, a hang, another
// exception or an unbounded allocation; and the records satisfy what the importer relies on
// (at least one, at most max_requests, hash_ids covering input_length in whole blocks,
// timestamps that never go backwards). The input is plain Mooncake JSON Lines, parsed with the
// real trace's 512-token blocks and again with 16-token blocks and a request cap. Records are
// not expanded to tokens: that allocates input_length tokens by design.
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/workload/mooncake.h"

namespace {

void parse(const std::string& text, int64_t block_tokens, int64_t max_requests) {
  using namespace kvsim;
  std::vector<sim::MooncakeRecord> records;
  try {
    records = sim::read_mooncake_text(text, "fuzz.jsonl", block_tokens, max_requests);
  } catch (const sim::InputError&) {
    return;
  } catch (const std::exception& e) {
    if (!fuzz::known_json_number_overflow(e)) throw;  // anything else is a crash
    return;
  }
  if (records.empty()) fuzz::report_property("mooncake_parser", "no records and no error");
  if (max_requests > 0 && static_cast<int64_t>(records.size()) > max_requests) {
    fuzz::report_property("mooncake_parser", "more records than max_requests");
  }
  uint64_t last = 0;
  for (const sim::MooncakeRecord& r : records) {
    const auto blocks = static_cast<size_t>((r.input_length + block_tokens - 1) / block_tokens);
    if (r.input_length < 1 || r.output_length < 0 || r.hash_ids.size() != blocks ||
        r.timestamp_ms < last) {
      fuzz::report_property("mooncake_parser", "a record breaks the importer's assumptions");
    }
    last = r.timestamp_ms;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  parse(text, 512, 0);
  parse(text, 16, 2);
  return 0;
}
