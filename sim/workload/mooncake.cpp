#include "sim/workload/mooncake.h"

#include <cmath>
#include <fstream>
#include <istream>
#include <sstream>

#include "sim/base/json_reader.h"
#include "sim/base/rng.h"

namespace kvsim::sim {

namespace {

// Reads records line by line from `in`; `path` names the source in every error.
std::vector<MooncakeRecord> read_mooncake_stream(std::istream& in, const std::string& path,
                                                 int64_t block_tokens, int64_t max_requests) {
  std::vector<MooncakeRecord> out;
  std::string line;
  size_t line_no = 0;
  uint64_t last_ts = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    const nlohmann::json doc = parse_json(line, path, line_no);
    JsonReader r(doc, where);
    MooncakeRecord rec;
    rec.line = line_no;
    rec.timestamp_ms = static_cast<uint64_t>(r.required_integer("timestamp", 0, INT64_MAX));
    rec.input_length = r.required_integer("input_length", 1, int64_t{1} << 32);
    rec.output_length = r.required_integer("output_length", 0, int64_t{1} << 32);
    rec.hash_ids = r.integer_array("hash_ids", 0, INT64_MAX);
    r.finish();
    const auto blocks = static_cast<size_t>((rec.input_length + block_tokens - 1) / block_tokens);
    if (rec.hash_ids.size() != blocks) {
      r.fail("hash_ids", "has " + std::to_string(rec.hash_ids.size()) + " ids but input_length " +
                             std::to_string(rec.input_length) + " needs " + std::to_string(blocks) +
                             " blocks of " + std::to_string(block_tokens));
    }
    if (rec.timestamp_ms < last_ts) r.fail("timestamp", "goes backwards");
    last_ts = rec.timestamp_ms;
    out.push_back(std::move(rec));
    if (max_requests > 0 && static_cast<int64_t>(out.size()) >= max_requests) break;
  }
  if (in.bad()) throw InputError(path + ": read error");
  if (out.empty()) throw InputError(path + ": no records");
  return out;
}

}  // namespace

std::vector<MooncakeRecord> read_mooncake(const std::string& path, int64_t block_tokens,
                                          int64_t max_requests) {
  return read_mooncake_text(read_text_file(path), path, block_tokens, max_requests);
}

std::vector<MooncakeRecord> read_mooncake_text(const std::string& text, const std::string& source,
                                               int64_t block_tokens, int64_t max_requests) {
  std::istringstream in(text);
  return read_mooncake_stream(in, source, block_tokens, max_requests);
}

void append_mooncake_block(int64_t hash_id, int64_t block_tokens, std::vector<Token>& out) {
  Rng rng(static_cast<uint64_t>(hash_id) * 0xD6E8FEB86659FD93ull + 0x5851F42D4C957F2Dull);
  for (int64_t i = 0; i < block_tokens; ++i)
    out.push_back(static_cast<Token>(rng.below(1u << 30)));
}

std::vector<Token> mooncake_block_tokens(int64_t hash_id, int64_t block_tokens) {
  std::vector<Token> t;
  t.reserve(static_cast<size_t>(block_tokens));
  append_mooncake_block(hash_id, block_tokens, t);
  return t;
}

namespace {

class MooncakeSource final : public ArrivalSource {
 public:
  MooncakeSource(std::vector<MooncakeRecord> records, std::string source, int64_t block_tokens,
                 double ms_per_tick, bool expand)
      : records_(std::move(records)),
        source_(std::move(source)),
        block_tokens_(block_tokens),
        ms_per_tick_(ms_per_tick),
        expand_(expand) {}

  bool next(Arrival& a) override {
    if (next_ >= records_.size()) return false;
    MooncakeRecord& rec = records_[next_++];
    a = Arrival{};
    a.rid = static_cast<RequestId>(next_);
    const double tick = std::floor(static_cast<double>(rec.timestamp_ms) / ms_per_tick_);
    if (!(tick <= static_cast<double>(kMooncakeMaxTick))) {  // NaN / inf included
      throw InputError(source_ + ":" + std::to_string(rec.line) +
                       ": field timestamp: " + std::to_string(rec.timestamp_ms) + " ms at " +
                       format_number(ms_per_tick_) + " ms per tick is beyond the last tick 2^53");
    }
    a.tick = static_cast<uint64_t>(tick);
    a.output_len = std::max<int64_t>(rec.output_length, 1);
    a.recipe = {PromptSegment{.kind = PromptSegment::Kind::kMooncake,
                              .value = static_cast<uint64_t>(block_tokens_),
                              .n = rec.input_length,
                              .items = std::move(rec.hash_ids)}};
    if (expand_) a.prompt = expand_recipe(a.recipe);
    return true;
  }

 private:
  std::vector<MooncakeRecord> records_;
  std::string source_;
  int64_t block_tokens_;
  double ms_per_tick_;
  bool expand_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<ArrivalSource> mooncake_source(const std::string& path, int64_t block_tokens,
                                               double ms_per_tick, int64_t max_requests) {
  return std::make_unique<MooncakeSource>(read_mooncake(path, block_tokens, max_requests), path,
                                          block_tokens, ms_per_tick, /*expand=*/true);
}

std::vector<Arrival> import_mooncake(const std::string& path, int64_t block_tokens,
                                     double ms_per_tick, int64_t max_requests) {
  MooncakeSource source(read_mooncake(path, block_tokens, max_requests), path, block_tokens,
                        ms_per_tick, /*expand=*/false);
  std::vector<Arrival> out;
  Arrival a;
  while (source.next(a))
    out.push_back(std::move(a));
  return out;
}

}  // namespace kvsim::sim
