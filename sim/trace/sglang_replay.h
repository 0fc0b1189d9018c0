// SGLang op-stream replay: feeds kvsim's core the exact sequence of calls with which the
// held-out oracle (tests/data/sglang-oracle/NOTE.md) drove SGLang's own Python RadixCache over
// a Mooncake-format trace, one request at a time:
//
//   m = match_prefix(tokens); lock(m.last_device_node)
//   need = floor(len(inserted)/P)*P - hit; if free < need: evict(need - free)
//   insert(inserted[:aligned], m.device_indices ++ new slots); free the slots of the part
//   insert found already present; unlock
//
// SGLang's RadixCache is a radix tree plus the token-to-KV slot allocator it is handed; it
// owns no KV bytes. Its kvsim counterpart is therefore RadixTree + a device PagedSlotAllocator
// (the same objects HiCache drives with `hierarchical = false`, without HiCache's KV byte
// pools, host pool and controller, which SGLang's RadixCache does not have either).
// docs/sglang-parity.md lists the deliberate differences.
//
// Tokens: block b of request i with hash id h is h*512 + j (j < 512). Tokens that SGLang makes
// request-unique (the partial last block by default, the output with with_output) are numbered
// from (max_hash + 1) * 512 upwards in file order: kvsim's tokens are 32-bit, and only
// equality between tokens matters (equal ids stay equal, distinct stay distinct).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "core/tree/token_run.h"

#include "core/common/types.h"
#include "sim/workload/mooncake.h"

namespace kvsim::sim {

inline constexpr int64_t kSglangBlockTokens = 512;  // Mooncake hash-id block size

struct SglangReplayOptions {
  int32_t page_size = 512;
  int64_t capacity_tokens = 10'000'000;  // KV slots; <= 0: unlimited
  bool tail_hash = false;                // partial last block = first tokens of its hash block
  bool with_output = false;              // insert input + output_length unique tokens
  bool server_match_limit = false;       // match at most len - 1 tokens
  bool keep_rows = true;                 // fill SglangReplayResult::rows
  bool final_check = true;               // sanity_check the tree after the replay (O(tree))
};

// One request, in the oracle's CSV columns.
struct SglangReplayRow {
  int64_t idx = 0;
  int64_t input_len = 0;
  int64_t hit_tokens = 0;       // page-aligned device hit returned by match_prefix
  int64_t new_tokens = 0;       // inserted tokens the tree did not hold before
  int64_t evict_requested = 0;  // shortfall passed to evict
  int64_t evicted = 0;          // tokens evict freed (whole leaves)
  int64_t cache_tokens = 0;     // slots in use after the request

  friend bool operator==(const SglangReplayRow&, const SglangReplayRow&) = default;
};

struct SglangReplayResult {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t inserted_new_tokens = 0;
  int64_t truncated_inserts = 0;
  int64_t evict_calls = 0;
  int64_t evict_requested_tokens = 0;
  int64_t evicted_tokens = 0;
  int64_t final_cache_tokens = 0;
  size_t final_nodes = 0;
  // Seconds inside the core's calls only, as the oracle times SGLang's (token construction and
  // the CSV row are outside). loop_s is the whole replay loop.
  double time_match_s = 0;
  double time_lock_s = 0;
  double time_evict_s = 0;
  double time_insert_s = 0;  // insert, freeing the duplicate slots, unlock
  double timed_s = 0;
  double loop_s = 0;
  std::vector<SglangReplayRow> rows;

  int64_t ops() const { return 2 * requests + evict_calls; }  // match + insert + evict calls
  double hit_rate() const {
    return input_tokens ? static_cast<double>(hit_tokens) / static_cast<double>(input_tokens) : 0;
  }
};

// A Mooncake trace with its token streams laid out once (the op stream's input). The prompts
// are expanded up front so that a replay's timed loop only reads them, into shared storage
// that the tree's keys view (RadixTree::insert of a TokenRun): a replay copies no token.
class SglangTrace {
 public:
  SglangTrace(std::vector<MooncakeRecord> records, bool tail_hash, bool with_output);
  // Reads `path` (InputError on bad input); limit 0 = every record.
  static SglangTrace load(const std::string& path, bool tail_hash, bool with_output,
                          int64_t limit = 0);

  size_t size() const { return offsets_.size() - 1; }
  int64_t input_length(size_t i) const { return input_len_[i]; }
  // Input tokens followed by the output tokens (when built with_output).
  TokenRun inserted(size_t i) const {
    return tokens_.slice(static_cast<size_t>(offsets_[i]),
                         static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
  }
  std::span<const Token> input(size_t i) const {
    return inserted(i).span().first(static_cast<size_t>(input_len_[i]));
  }
  bool tail_hash() const { return tail_hash_; }
  bool with_output() const { return with_output_; }
  size_t total_tokens() const { return tokens_.size(); }
  // Seconds of the fastest of `passes` reads of every input token (a sum, so nothing is
  // skipped): the floor of any replay that looks at each prompt once (issue 12).
  double one_pass_seconds(int passes = 3) const;

 private:
  bool tail_hash_;
  bool with_output_;
  TokenRun tokens_;  // every request's tokens, back to back
  std::vector<int64_t> offsets_;
  std::vector<int64_t> input_len_;
};

// One fresh replay (a new tree and allocator) of `trace` under `options`. The trace must have
// been built with the same tail/output variant (KV_ASSERT). Checks at the end that nothing is
// locked, that the tree's slots are exactly the allocator's used slots, and the tree's full
// sanity_check (InvariantViolation on failure).
SglangReplayResult replay_sglang_ops(const SglangTrace& trace, const SglangReplayOptions& options);

// The oracle's CSV: header + one row per request.
void write_sglang_rows(std::ostream& out, const std::vector<SglangReplayRow>& rows);
// Parses an oracle CSV (InputError naming file:line:field on bad input).
std::vector<SglangReplayRow> read_sglang_rows(const std::string& path);

}  // namespace kvsim::sim
