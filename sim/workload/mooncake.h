// Import of the Mooncake trace format (FAST'25 release): one JSON object per line with
// `timestamp` (ms), `input_length`, `output_length` and `hash_ids`. A hash id names a block of
// `block_tokens` tokens together with everything before it, so blocks are expanded to tokens
// as a pure function of their id: equal ids give equal tokens, and a request's prompt is the
// concatenation of its blocks, cut to input_length (the last block may be partial).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/workload/workload.h"

namespace kvsim::sim {

struct MooncakeRecord {
  uint64_t timestamp_ms = 0;
  int64_t input_length = 0;
  int64_t output_length = 0;
  std::vector<int64_t> hash_ids;
  size_t line = 0;  // its line in the source (1-based), for errors raised after the parse
};

// The last tick a Mooncake timestamp may map to: ticks are exact in a double below 2^53, and the
// simulator adds durations to them without overflow. A timestamp beyond it at the given
// ms_per_tick is an InputError naming its line.
inline constexpr uint64_t kMooncakeMaxTick = uint64_t{1} << 53;

// Strict parse: every malformed line is an InputError naming file, line and field;
// `max_requests` (0 = all) keeps the first records only.
std::vector<MooncakeRecord> read_mooncake(const std::string& path, int64_t block_tokens,
                                          int64_t max_requests = 0);
// The same parse over text already in memory (the fuzzers' entry point); errors name `source`
// where read_mooncake names the path.
std::vector<MooncakeRecord> read_mooncake_text(const std::string& text, const std::string& source,
                                               int64_t block_tokens, int64_t max_requests = 0);
std::vector<Token> mooncake_block_tokens(int64_t hash_id, int64_t block_tokens);
// Appends mooncake_block_tokens(hash_id, block_tokens) to `out` without a temporary.
void append_mooncake_block(int64_t hash_id, int64_t block_tokens, std::vector<Token>& out);
// The arrivals of a Mooncake trace; each carries its prompt recipe (its block ids).
std::vector<Arrival> import_mooncake(const std::string& path, int64_t block_tokens,
                                     double ms_per_tick, int64_t max_requests = 0);
// The same arrivals, streamed: the records (block ids) are read up front, each prompt is
// expanded only when its arrival is taken.
std::unique_ptr<ArrivalSource> mooncake_source(const std::string& path, int64_t block_tokens,
                                               double ms_per_tick, int64_t max_requests = 0);

}  // namespace kvsim::sim
