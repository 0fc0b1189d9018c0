#include "tools/kvsim/cmd_sglang_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/trace/sglang_replay.h"

namespace kvsim::tools {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Prints the first differences between the replay and the oracle; returns how many rows differ.
size_t compare_rows(const std::string& path, const std::vector<sim::SglangReplayRow>& got) {
  const std::vector<sim::SglangReplayRow> want = sim::read_sglang_rows(path);
  size_t hit_diffs = 0;
  size_t other_diffs = 0;
  size_t shown = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const auto& g = got[i];
    const auto& w = want[i];
    if (g == w) continue;
    (g.hit_tokens != w.hit_tokens ? hit_diffs : other_diffs) += 1;
    if (shown++ < 5) {
      std::printf(
          "  request %lld: kvsim hit %lld new %lld evict %lld/%lld cache %lld; "
          "sglang hit %lld new %lld evict %lld/%lld cache %lld\n",
          static_cast<long long>(g.idx), static_cast<long long>(g.hit_tokens),
          static_cast<long long>(g.new_tokens), static_cast<long long>(g.evict_requested),
          static_cast<long long>(g.evicted), static_cast<long long>(g.cache_tokens),
          static_cast<long long>(w.hit_tokens), static_cast<long long>(w.new_tokens),
          static_cast<long long>(w.evict_requested), static_cast<long long>(w.evicted),
          static_cast<long long>(w.cache_tokens));
    }
  }
  const size_t count_diff =
      got.size() > want.size() ? got.size() - want.size() : want.size() - got.size();
  std::printf("compare %s: %zu rows vs %zu; %zu differ in hit tokens, %zu in other columns\n",
              path.c_str(), got.size(), want.size(), hit_diffs, other_diffs);
  return hit_diffs + other_diffs + count_diff;
}

}  // namespace

int sglang_replay_command(const SglangReplayCommand& c) {
  try {
    if (c.tail != "unique" && c.tail != "hash") {
      throw sim::InputError("--tail: \"" + c.tail + "\" is not one of unique, hash");
    }
    if (!std::isfinite(c.capacity_tokens) || c.capacity_tokens >= 9.0e18) {
      throw sim::InputError("--capacity-tokens: must be a finite token count");
    }
    sim::SglangReplayOptions o;
    o.page_size = c.page_size;
    o.capacity_tokens = static_cast<int64_t>(c.capacity_tokens);
    o.tail_hash = c.tail == "hash";
    o.with_output = c.with_output;
    o.server_match_limit = c.server_match_limit;
    if (o.capacity_tokens > 0 && o.capacity_tokens < o.page_size) {
      throw sim::InputError("--capacity-tokens: " + std::to_string(o.capacity_tokens) +
                            " holds no whole page of " + std::to_string(o.page_size) + " tokens");
    }
    const sim::SglangTrace trace =
        sim::SglangTrace::load(c.trace, o.tail_hash, o.with_output, c.limit);
    std::vector<double> timed;
    std::vector<double> loop;
    sim::SglangReplayResult first;
    for (int64_t k = 0; k < std::max<int64_t>(c.repeat, 1); ++k) {
      o.keep_rows = k == 0;
      sim::SglangReplayResult r = sim::replay_sglang_ops(trace, o);
      timed.push_back(r.timed_s);
      loop.push_back(r.loop_s);
      if (k == 0) {
        first = std::move(r);
      } else if (r.hit_tokens != first.hit_tokens) {
        std::fprintf(stderr, "kvsim: replay %lld hit %lld tokens, the first %lld\n",
                     static_cast<long long>(k), static_cast<long long>(r.hit_tokens),
                     static_cast<long long>(first.hit_tokens));
        return 1;
      }
    }
    if (!c.per_request_out.empty()) {
      std::ofstream out(c.per_request_out);
      if (!out) throw sim::InputError(c.per_request_out + ": cannot open for writing");
      sim::write_sglang_rows(out, first.rows);
    }
    const double fresh_s = timed.front();
    const std::vector<double> rest(timed.begin() + 1, timed.end());
    const double warm_s = rest.empty() ? fresh_s : median(rest);
    const auto ops = static_cast<double>(first.ops());
    const double floor_s = trace.one_pass_seconds();
    if (c.json) {
      const nlohmann::json j = {{"page_size", o.page_size},
                                {"capacity_tokens", o.capacity_tokens},
                                {"tail", c.tail},
                                {"with_output", c.with_output},
                                {"server_match_limit", c.server_match_limit},
                                {"requests", first.requests},
                                {"input_tokens", first.input_tokens},
                                {"hit_tokens", first.hit_tokens},
                                {"token_hit_rate", first.hit_rate()},
                                {"inserted_new_tokens", first.inserted_new_tokens},
                                {"truncated_inserts", first.truncated_inserts},
                                {"evict_calls", first.evict_calls},
                                {"evict_requested_tokens", first.evict_requested_tokens},
                                {"evicted_tokens", first.evicted_tokens},
                                {"final_cache_tokens", first.final_cache_tokens},
                                {"final_nodes", first.final_nodes},
                                {"ops", first.ops()},
                                {"timed_s_all", timed},
                                {"loop_s_all", loop},
                                {"fresh_timed_s", fresh_s},
                                {"warm_timed_s", warm_s},
                                {"fresh_ops_per_s", ops / fresh_s},
                                {"warm_ops_per_s", ops / warm_s},
                                {"one_pass_floor_s", floor_s}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("kvsim sglang-replay  trace=%s  page_size=%d  capacity_tokens=%s  tail=%s%s%s\n",
                  c.trace.c_str(), o.page_size,
                  o.capacity_tokens > 0 ? std::to_string(o.capacity_tokens).c_str() : "inf",
                  c.tail.c_str(), c.with_output ? "  with_output" : "",
                  c.server_match_limit ? "  server_match_limit" : "");
      std::printf("requests          %lld\n", static_cast<long long>(first.requests));
      std::printf("input tokens      %lld\n", static_cast<long long>(first.input_tokens));
      std::printf("hit tokens        %lld\n", static_cast<long long>(first.hit_tokens));
      std::printf("token hit rate    %.4f\n", first.hit_rate());
      std::printf(
          "evict calls       %lld  (requested %lld tok, evicted %lld tok)  truncated "
          "inserts %lld\n",
          static_cast<long long>(first.evict_calls),
          static_cast<long long>(first.evict_requested_tokens),
          static_cast<long long>(first.evicted_tokens),
          static_cast<long long>(first.truncated_inserts));
      std::printf(
          "timed (first run) %.4f s  (match %.4f + lock %.4f + evict %.4f + insert/unlock "
          "%.4f);  loop %.4f s\n",
          fresh_s, first.time_match_s, first.time_lock_s, first.time_evict_s, first.time_insert_s,
          loop.front());
      std::printf("ops/s             fresh %.0f", ops / fresh_s);
      if (!rest.empty()) {
        std::printf("  warm %.0f (median of %zu further replays in this process)", ops / warm_s,
                    rest.size());
      }
      std::printf("  (ops = match_prefix + insert + evict calls = %lld)\n",
                  static_cast<long long>(first.ops()));
      std::printf("tokens/s          fresh %.4g  (input tokens / timed wall)\n",
                  static_cast<double>(first.input_tokens) / fresh_s);
      std::printf(
          "floor             %.4f s  (one read of every input token); fresh = %.2fx it, "
          "warm = %.2fx\n",
          floor_s, fresh_s / floor_s, warm_s / floor_s);
    }
    if (!c.compare.empty() && compare_rows(c.compare, first.rows) != 0) return 1;
    return 0;
  } catch (const sim::InputError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  }
}

}  // namespace kvsim::tools
