// `kvsim sglang-replay`: the SGLang RadixCache op stream on kvsim's core
// (sim/trace/sglang_replay.h).
#pragma once

#include <cstdint>
#include <string>

namespace kvsim::tools {

struct SglangReplayCommand {
  std::string trace;  // Mooncake-format JSONL
  int32_t page_size = 512;
  double capacity_tokens = 1e7;  // <= 0: unlimited
  std::string tail = "unique";   // unique | hash
  bool with_output = false;
  bool server_match_limit = false;
  int64_t limit = 0;            // first N requests (0 = all)
  int64_t repeat = 1;           // fresh replays in this process
  std::string per_request_out;  // write the oracle's CSV here
  std::string compare;          // compare every row with this oracle CSV
  bool json = false;
};

int sglang_replay_command(const SglangReplayCommand& c);

}  // namespace kvsim::tools
