#include "sim/trace/sglang_replay.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>

#include "core/common/assert.h"
#include "core/pools/paged_allocator.h"
#include "core/tree/radix_tree.h"
#include "sim/base/json_reader.h"

namespace kvsim::sim {

SglangTrace::SglangTrace(std::vector<MooncakeRecord> records, bool tail_hash, bool with_output)
    : tail_hash_(tail_hash), with_output_(with_output) {
  int64_t max_hash = -1;
  int64_t total = 0;
  for (const MooncakeRecord& r : records) {
    for (int64_t h : r.hash_ids)
      max_hash = std::max(max_hash, h);
    total += r.input_length + (with_output ? r.output_length : 0);
  }
  // Block tokens take [0, (max_hash + 1) * 512); request-unique tokens follow.
  const int64_t unique_base = (max_hash + 1) * kSglangBlockTokens;
  if (unique_base + total > std::numeric_limits<Token>::max()) {
    throw InputError("sglang replay: hash ids up to " + std::to_string(max_hash) + " and " +
                     std::to_string(total) + " tokens do not fit 32-bit token ids");
  }
  Token next_unique = static_cast<Token>(unique_base);
  std::vector<Token> tokens;
  tokens.reserve(static_cast<size_t>(total));
  offsets_.reserve(records.size() + 1);
  input_len_.reserve(records.size());
  offsets_.push_back(0);
  for (const MooncakeRecord& r : records) {
    const int64_t full_blocks = r.input_length / kSglangBlockTokens;
    const int64_t tail = r.input_length % kSglangBlockTokens;
    for (int64_t b = 0; b < full_blocks; ++b) {
      const auto first =
          static_cast<Token>(r.hash_ids[static_cast<size_t>(b)] * kSglangBlockTokens);
      for (Token j = 0; j < kSglangBlockTokens; ++j)
        tokens.push_back(first + j);
    }
    if (tail > 0) {
      const auto first =
          static_cast<Token>(r.hash_ids[static_cast<size_t>(full_blocks)] * kSglangBlockTokens);
      for (int64_t j = 0; j < tail; ++j)
        tokens.push_back(tail_hash ? first + static_cast<Token>(j) : next_unique++);
    }
    if (with_output) {
      for (int64_t k = 0; k < r.output_length; ++k)
        tokens.push_back(next_unique++);
    }
    input_len_.push_back(r.input_length);
    offsets_.push_back(static_cast<int64_t>(tokens.size()));
  }
  tokens_ = TokenRun::adopt(std::move(tokens));
}

SglangTrace SglangTrace::load(const std::string& path, bool tail_hash, bool with_output,
                              int64_t limit) {
  return SglangTrace(read_mooncake(path, kSglangBlockTokens, limit), tail_hash, with_output);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

double SglangTrace::one_pass_seconds(int passes) const {
  double best = 0;
  uint64_t sum = 0;
  for (int k = 0; k < passes; ++k) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < size(); ++i) {
      for (const Token t : input(i))
        sum += static_cast<uint32_t>(t);
    }
    const double s = seconds(t0, Clock::now());
    best = k == 0 ? s : std::min(best, s);
  }
  // Keeps the sum observable, so the reads are not optimised away.
  volatile uint64_t sink = sum;
  (void)sink;
  return best;
}

SglangReplayResult replay_sglang_ops(const SglangTrace& trace, const SglangReplayOptions& o) {
  KV_ASSERT(o.page_size > 0, "page size must be positive");
  const int64_t P = o.page_size;
  const bool unlimited = o.capacity_tokens <= 0;
  // Unlimited: enough pages for every inserted token, so evict is never called.
  const int64_t cap = unlimited ? static_cast<int64_t>(trace.total_tokens()) : o.capacity_tokens;
  const int64_t pages = std::max<int64_t>(cap / P, 1);
  PagedSlotAllocator alloc(Tier::kDevice, pages * P, o.page_size);
  RadixTree tree(RadixTreeOptions{.page_size = o.page_size});
  auto used = [&] { return alloc.capacity() - alloc.available_size(); };
  // SGLang's allocator has `cap` token slots; the tree only ever uses whole pages of them.
  auto free_tokens = [&] { return cap - used(); };

  SglangReplayResult res;
  if (o.keep_rows) res.rows.reserve(trace.size());
  const auto loop0 = Clock::now();
  for (size_t i = 0; i < trace.size(); ++i) {
    std::span<const Token> input = trace.input(i);
    const TokenRun ins = trace.inserted(i);
    std::span<const Token> mkey = input;
    if (o.server_match_limit && !mkey.empty()) mkey = mkey.first(mkey.size() - 1);

    const auto t0 = Clock::now();
    MatchResult m = tree.match_prefix(0, mkey);
    const auto t1 = Clock::now();
    const LockRecord lock = tree.lock(*m.last_device_node);
    const auto t2 = Clock::now();
    const auto hit = static_cast<int64_t>(m.device_indices.size());

    int64_t ins_len = static_cast<int64_t>(ins.size()) / P * P;
    int64_t need = ins_len - hit;
    SglangReplayRow row{
        .idx = static_cast<int64_t>(i), .input_len = trace.input_length(i), .hit_tokens = hit};
    if (need > 0 && free_tokens() < need) {
      row.evict_requested = need - free_tokens();
      const auto e0 = Clock::now();
      while (row.evicted < row.evict_requested) {
        TreeNode* victim = tree.next_device_victim();
        if (victim == nullptr) break;
        row.evicted += victim->token_count();
        alloc.free(tree.remove_device_leaf(*victim).full_device());
      }
      res.time_evict_s += seconds(e0, Clock::now());
      ++res.evict_calls;
      res.evict_requested_tokens += row.evict_requested;
      res.evicted_tokens += row.evicted;
      if (free_tokens() < need) {  // the request alone is larger than free + evictable
        need = free_tokens() / P * P;
        ins_len = hit + need;
        ++res.truncated_inserts;
      }
    }
    IndexVector value = std::move(m.device_indices);
    if (need > 0) {
      std::optional<IndexVector> fresh = alloc.alloc(need);
      KV_ASSERT(fresh.has_value(), "allocation failed after evicting the shortfall");
      value.append(*fresh);
    }

    const auto t4 = Clock::now();
    const InsertResult ir = tree.insert(0, ins.first(static_cast<size_t>(ins_len)), value);
    // Like cache_finished_req: the slots of a part the tree already held go back.
    if (ir.prefix_len > hit) alloc.free(value.slice(static_cast<size_t>(hit), ir.prefix_len));
    tree.unlock(lock);
    const auto t5 = Clock::now();

    res.time_match_s += seconds(t0, t1);
    res.time_lock_s += seconds(t1, t2);
    res.time_insert_s += seconds(t4, t5);
    row.new_tokens = ins_len - ir.prefix_len;
    row.cache_tokens = used();
    ++res.requests;
    res.input_tokens += row.input_len;
    res.hit_tokens += hit;
    res.inserted_new_tokens += row.new_tokens;
    if (o.keep_rows) res.rows.push_back(row);
  }
  res.loop_s = seconds(loop0, Clock::now());
  res.timed_s = res.time_match_s + res.time_lock_s + res.time_evict_s + res.time_insert_s;
  res.final_cache_tokens = used();
  res.final_nodes = tree.node_count();

  KV_ASSERT(tree.protected_size() == 0, "a request's lock outlived the replay");
  KV_ASSERT(tree.evictable_size() == used(), "tree holds " + std::to_string(tree.evictable_size()) +
                                                 " tokens but " + std::to_string(used()) +
                                                 " slots are allocated");
  if (o.final_check) {
    SanityReport report;
    tree.sanity_check(report);
    KV_ASSERT(report.ok(), report.summary());
    const std::string problem = alloc.check();
    KV_ASSERT(problem.empty(), problem);
  }
  return res;
}

void write_sglang_rows(std::ostream& out, const std::vector<SglangReplayRow>& rows) {
  out << "idx,input_len,hit_tokens,new_tokens,evict_requested,evicted,cache_tokens\n";
  for (const SglangReplayRow& r : rows) {
    out << r.idx << ',' << r.input_len << ',' << r.hit_tokens << ',' << r.new_tokens << ','
        << r.evict_requested << ',' << r.evicted << ',' << r.cache_tokens << '\n';
  }
}

std::vector<SglangReplayRow> read_sglang_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open file");
  static constexpr const char* kColumns[] = {
      "idx", "input_len", "hit_tokens", "new_tokens", "evict_requested", "evicted", "cache_tokens"};
  std::string line;
  if (!std::getline(in, line) ||
      line != "idx,input_len,hit_tokens,new_tokens,evict_requested,evicted,cache_tokens") {
    throw InputError(path + ":1: field header: expected the oracle's 7 columns");
  }
  std::vector<SglangReplayRow> rows;
  size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    int64_t v[7];
    std::istringstream s(line);
    for (int c = 0; c < 7; ++c) {
      std::string cell;
      const bool got = static_cast<bool>(std::getline(s, cell, ','));
      size_t used = 0;
      bool ok = got && !cell.empty();
      if (ok) {
        try {
          v[c] = std::stoll(cell, &used);
        } catch (const std::exception&) {
          ok = false;
        }
      }
      if (!ok || used != cell.size()) {
        throw InputError(path + ":" + std::to_string(line_no) + ": field " + kColumns[c] +
                         ": expected an integer");
      }
    }
    rows.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6]});
  }
  return rows;
}

}  // namespace kvsim::sim
