#include "sim/trace/call_trace_sidecar.h"

#include <cstdint>
#include <cstring>

namespace kvsim::sim {

std::pair<size_t, size_t> blob_range(JsonReader& r, const std::string& key, size_t item,
                                     const std::string& blob) {
  const std::vector<int64_t> ref = r.integer_array(key, 0, INT64_MAX);
  if (ref.size() != 2) r.fail(key, "expected [byte offset, count]");
  const auto off = static_cast<size_t>(ref[0]);
  const auto n = static_cast<size_t>(ref[1]);
  if (off > blob.size() || n > (blob.size() - off) / item) {
    r.fail(key, "range beyond the end of the sidecar (" + std::to_string(blob.size()) + " bytes)");
  }
  return {off, n};
}

std::vector<Token> tokens_of(JsonReader& r, const std::vector<Call>& calls, size_t index,
                             const std::string& blob, PageIds& pages) {
  std::vector<Token> out;
  if (!r.has("tok") && !r.has("tok_of") && !r.has("pages")) {
    for (int64_t t : r.integer_array("tokens", INT32_MIN, INT32_MAX)) {
      out.push_back(static_cast<Token>(t));
    }
    return out;
  }
  if (r.has("tok_of")) {
    const std::vector<int64_t> ref = r.integer_array("tok_of", 0, INT64_MAX);
    if (ref.size() != 2 || ref[0] >= static_cast<int64_t>(index)) {
      r.fail("tok_of", "expected [earlier call, count]");
    }
    const std::vector<Token>& src = calls[static_cast<size_t>(ref[0])].tokens;
    if (static_cast<size_t>(ref[1]) > src.size())
      r.fail("tok_of", "longer than that call's tokens");
    out.assign(src.begin(), src.begin() + ref[1]);
  }
  if (r.has("tok") && r.has("pages")) r.fail("pages", "a key has either tok or pages, not both");
  if (r.has("tok")) {
    const auto [off, n] = blob_range(r, "tok", sizeof(Token), blob);
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, blob.data() + off, n * sizeof(Token));
  }
  if (r.has("pages")) {
    const auto [off, n] = blob_range(r, "pages", sizeof(uint64_t), blob);
    const auto P = static_cast<size_t>(pages.page_size);
    if (out.size() % P != 0) r.fail("pages", "follows a tok_of that is not page-aligned");
    if (n > (size_t{1} << 31) / P) r.fail("pages", "too many pages");
    for (size_t k = 0; k < n; ++k) {
      uint64_t h = 0;
      std::memcpy(&h, blob.data() + off + k * sizeof h, sizeof h);
      auto [it, fresh] = pages.ids.emplace(h, static_cast<Token>(pages.ids.size()));
      if (fresh && pages.ids.size() > static_cast<size_t>(INT32_MAX))
        r.fail("pages", "more distinct pages than 32-bit token ids");
      out.insert(out.end(), P, it->second);
    }
  }
  return out;
}

std::vector<SlotIndex> value_of(JsonReader& r, const std::string& blob, const std::string& runs_key,
                                const std::string& inline_key, size_t max_slots) {
  if (!r.has(runs_key)) return r.integer_array(inline_key, 0, INT64_MAX);
  const auto [off, runs] = blob_range(r, runs_key, 2 * sizeof(int64_t), blob);
  std::vector<SlotIndex> out;
  for (size_t i = 0; i < runs; ++i) {
    int64_t run[2];
    std::memcpy(run, blob.data() + off + i * sizeof run, sizeof run);
    if (run[0] < 0 || run[1] < 0) r.fail(runs_key, "negative slot or run length");
    if (static_cast<uint64_t>(run[1]) > max_slots - out.size())
      r.fail(runs_key, "more than " + std::to_string(max_slots) + " slots");
    if (run[1] > 0 && run[1] - 1 > INT64_MAX - run[0]) r.fail(runs_key, "slot out of range");
    for (int64_t k = 0; k < run[1]; ++k)
      out.push_back(run[0] + k);
  }
  return out;
}

}  // namespace kvsim::sim
