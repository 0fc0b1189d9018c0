// Fidelity: the simulator's prefix-cache hits against what the serving system reported for the
// same requests (a workload imported from SGLang dumps carries each request's cached_tokens,
// and with --enable-cache-report the split by tier). It is the check that the simulated
// deployment behaves like the one the dump came from; docs/sglang.md says why they can differ.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/model/scheduler.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

struct FidelityRow {
  RequestId rid = 0;
  std::string sglang_rid;
  int64_t prompt = 0;
  bool admitted = false;  // false: kvsim never admitted it (aborted while waiting)
  int64_t kvsim_device = 0, kvsim_host = 0;
  int64_t reported = 0;                              // cached_tokens
  int64_t reported_device = -1, reported_host = -1;  // -1: no split reported
  int64_t reported_storage = -1;
  bool stand_in = false;
  int64_t kvsim() const { return kvsim_device + kvsim_host; }
  int64_t diff() const { return kvsim() - reported; }
};

struct FidelityReport {
  std::vector<FidelityRow> rows;  // every request with a reported cached_tokens, by rid
  int64_t compared = 0;           // rows kvsim admitted
  int64_t exact = 0;              // ... whose total hit equals the reported one
  int64_t kvsim_tokens = 0, reported_tokens = 0;  // over the compared rows
  // Over the compared rows with a reported split by tier (with_tiers of them):
  int64_t kvsim_device = 0, kvsim_host = 0;
  int64_t reported_device = 0, reported_host = 0, reported_storage = 0;
  int64_t with_tiers = 0;
  int64_t stand_in = 0;  // compared rows whose prompt is a stand-in tokenisation
  bool empty() const { return rows.empty(); }
};

bool has_reported(const std::vector<Arrival>& arrivals);
FidelityReport compare_fidelity(const std::vector<Arrival>& arrivals, const RunResult& result);
// The text block `kvsim run` prints under its summary: totals, agreement, the largest
// differences (every request when there are at most `all_up_to`).
std::string fidelity_text(const FidelityReport& f, size_t largest = 10, size_t all_up_to = 20);
nlohmann::json fidelity_json(const FidelityReport& f);

}  // namespace kvsim::sim
