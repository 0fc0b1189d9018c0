#include "sim/campaign/resources.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "sim/base/json_reader.h"

namespace kvsim::sim {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Saturating arithmetic: a product of fields up to 2^40 each must not wrap to "small".
uint64_t mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}
uint64_t add(uint64_t a, uint64_t b) {
  return a > kMax - b ? kMax : a + b;
}
uint64_t u(int64_t v) {
  return v < 0 ? 0 : static_cast<uint64_t>(v);
}

// Per-slot bookkeeping of a pool (free lists, slot→node maps): a generous bound.
constexpr uint64_t kPerSlot = 32;
// Per request the executor keeps after it is done (SimRequest, map node).
constexpr uint64_t kPerRequest = 512;

// The prompts a streamed generated workload holds at once. A request in flight holds its
// tokens (4 bytes each) and their prefix hashes (8 bytes each); a prompt is at most a system
// prompt, a session history capped at 4 x prompt_max (agentic), and its outputs. A request
// lives at most liveness_ticks (longer is a liveness violation, which ends the run), so the
// requests in flight are those that arrived within one liveness window: at the arrival rate,
// mean + 8 standard deviations (Poisson) + the running batch, at most every request. The
// generator's own state: the system prompts and one history per session (4 bytes a token).
uint64_t streamed_prompt_bytes(const Scenario& s) {
  const WorkloadOptions& w = s.workload;
  const uint64_t history = mul(4, u(w.prompt_max));
  const uint64_t prompt = add(add(u(w.system_prompt_tokens), history), u(w.output_max));
  const double mean = std::max(0.0, w.arrival_rate) *
                      static_cast<double>(std::max<int64_t>(s.scheduler.liveness_ticks, 1));
  const double window = mean + 8 * std::sqrt(mean) + 16;
  const uint64_t in_window = window >= 9.0e18 ? kMax : static_cast<uint64_t>(std::ceil(window));
  const uint64_t in_flight = std::min(u(w.requests), add(in_window, u(s.scheduler.max_running)));
  const uint64_t generator = mul(4, add(mul(u(w.system_prompts), u(w.system_prompt_tokens)),
                                        mul(u(w.sessions), add(history, u(w.output_max)))));
  return add(mul(mul(in_flight, prompt), 12), generator);
}

}  // namespace

uint64_t default_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{8} << 30;
  return mul(u(pages), u(page)) / 2;
}

std::vector<MemoryNeed> scenario_memory(const Scenario& s, bool generates_workload) {
  const HiCacheOptions& c = s.cache;
  const uint64_t layers = u(c.layer_count);
  const uint64_t item = c.item_bytes;
  std::vector<MemoryNeed> needs;
  // Each pool holds one page more than asked (slot 0 is the null slot), device and host.
  auto pool = [&](const char* field, int64_t slots, int64_t page, uint64_t layer_count,
                  uint64_t bytes) {
    if (slots <= 0) return;
    const uint64_t n = add(u(slots), u(page));
    needs.push_back({field, add(mul(mul(n, layer_count), bytes), mul(n, kPerSlot))});
  };
  const int64_t page = std::max(1, c.page_size);
  pool("cache.device_tokens", c.device_tokens, page, layers, item);
  pool("cache.host_tokens", c.host_tokens, page, layers, item);
  if (c.has_swa()) {  // a SWA pool size of 0 means the main pool's
    pool("cache.swa_device_tokens", c.swa_device_tokens > 0 ? c.swa_device_tokens : c.device_tokens,
         page, layers, item);
    pool("cache.swa_host_tokens", c.swa_host_tokens > 0 ? c.swa_host_tokens : c.host_tokens, page,
         layers, item);
  }
  if (c.has_mamba()) {  // 0 host states means twice the device states
    pool("cache.mamba_device_states", c.mamba_device_states, 1, u(c.mamba_layer_count),
         c.mamba_state_bytes);
    pool("cache.mamba_host_states",
         c.mamba_host_states > 0 ? c.mamba_host_states : 2 * c.mamba_device_states, 1,
         u(c.mamba_layer_count), c.mamba_state_bytes);
  }
  if (s.sparse_index_bytes_per_page > 0) {
    pool("cache.sparse_index_bytes_per_page", c.device_tokens / page + 1, 0, layers,
         u(s.sparse_index_bytes_per_page));
  }
  const WorkloadOptions& w = s.workload;
  // Requests stay in the executor's table (a few hundred bytes each once done), plus a fixed
  // allowance for buffers that do not scale with a field (scratch, streams).
  needs.push_back({"workload.requests", add(mul(u(w.requests), kPerRequest), uint64_t{1} << 20)});
  if (generates_workload && w.kind != WorkloadKind::kMooncake) {
    // The generator streams (sim/workload/workload.h ArrivalSource) and a finished request drops
    // its tokens: prompts are held by the requests in flight only, not by every request.
    needs.push_back({"workload.prompt_max", streamed_prompt_bytes(s)});
  }
  std::stable_sort(needs.begin(), needs.end(),
                   [](const MemoryNeed& a, const MemoryNeed& b) { return a.bytes > b.bytes; });
  return needs;
}

std::string format_bytes(uint64_t bytes) {
  char buf[96];
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= 1024 && i < 6) {
    v /= 1024;
    ++i;
  }
  if (i == 0) {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s (%llu bytes)", v, units[i],
                  static_cast<unsigned long long>(bytes));
  }
  return bytes == kMax ? std::string("more than 16 EiB") : std::string(buf);
}

void check_memory(const Scenario& s, bool generates_workload, uint64_t limit,
                  const std::string& source) {
  const std::vector<MemoryNeed> needs = scenario_memory(s, generates_workload);
  uint64_t total = 0;
  for (const MemoryNeed& n : needs)
    total = add(total, n.bytes);
  if (total <= limit) return;
  throw InputError(source + ": field " + needs.front().field + ": needs " +
                   format_bytes(needs.front().bytes) + " (the run " + format_bytes(total) +
                   " in all), over the memory limit of " + format_bytes(limit) +
                   " (--memory-limit)");
}

void check_token_memory(uint64_t tokens, uint64_t bytes_per_token, uint64_t limit,
                        const std::string& where, const std::string& field) {
  const uint64_t bytes = mul(tokens, bytes_per_token);
  if (bytes <= limit) return;
  throw InputError(where + ": field " + field + ": " + std::to_string(tokens) + " tokens need " +
                   format_bytes(bytes) + ", over the memory limit of " + format_bytes(limit) +
                   " (--memory-limit)");
}

void check_trace_memory(const OpTrace& trace, uint64_t limit, const std::string& where) {
  check_memory(trace.scenario, false, limit, where + " (scenario)");
  uint64_t tokens = 0;
  for (const Op& op : trace.ops) {
    if (op.kind == OpKind::kArrive) {
      tokens = add(tokens, add(op.prompt.size(), u(op.output_len)));
    }
  }
  const uint64_t pools = [&] {
    uint64_t total = 0;
    for (const MemoryNeed& n : scenario_memory(trace.scenario, false))
      total = add(total, n.bytes);
    return total;
  }();
  check_token_memory(tokens, 12, limit > pools ? limit - pools : 0, where,
                     "output_len (the arrive ops' prompts and outputs)");
}

bool parse_bytes(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 24) return false;
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (kMax - d) / 10) return false;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return false;
  uint64_t scale = 1;
  if (i < text.size()) {
    const std::string suffix = text.substr(i);
    if (suffix == "K" || suffix == "k" || suffix == "KiB")
      scale = uint64_t{1} << 10;
    else if (suffix == "M" || suffix == "MiB")
      scale = uint64_t{1} << 20;
    else if (suffix == "G" || suffix == "GiB")
      scale = uint64_t{1} << 30;
    else if (suffix == "T" || suffix == "TiB")
      scale = uint64_t{1} << 40;
    else
      return false;
  }
  if (v == 0 || v > kMax / scale) return false;
  *out = v * scale;
  return true;
}

}  // namespace kvsim::sim
