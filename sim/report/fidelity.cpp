#include "sim/report/fidelity.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace kvsim::sim {

bool has_reported(const std::vector<Arrival>& arrivals) {
  return std::any_of(arrivals.begin(), arrivals.end(), [](const Arrival& a) {
    return a.reported.has_value() && a.reported->cached_tokens >= 0;
  });
}

FidelityReport compare_fidelity(const std::vector<Arrival>& arrivals, const RunResult& result) {
  std::map<RequestId, const RequestHit*> hits;
  for (const RequestHit& h : result.request_hits)
    hits[h.rid] = &h;
  FidelityReport f;
  for (const Arrival& a : arrivals) {
    if (!a.reported || a.reported->cached_tokens < 0) continue;
    const ReportedCache& rep = *a.reported;
    FidelityRow row{.rid = a.rid,
                    .sglang_rid = rep.sglang_rid,
                    .prompt = a.prompt.empty() ? recipe_length(a.recipe)
                                               : static_cast<int64_t>(a.prompt.size()),
                    .reported = rep.cached_tokens,
                    .reported_device = rep.device,
                    .reported_host = rep.host,
                    .reported_storage = rep.storage,
                    .stand_in = rep.stand_in};
    const auto it = hits.find(a.rid);
    if (it != hits.end()) {
      row.admitted = true;
      row.kvsim_device = it->second->device;
      row.kvsim_host = it->second->host;
      ++f.compared;
      f.exact += row.diff() == 0 ? 1 : 0;
      f.kvsim_tokens += row.kvsim();
      f.reported_tokens += row.reported;
      f.stand_in += row.stand_in ? 1 : 0;
      if (row.reported_device >= 0 && row.reported_host >= 0) {
        ++f.with_tiers;
        f.kvsim_device += row.kvsim_device;
        f.kvsim_host += row.kvsim_host;
        f.reported_device += row.reported_device;
        f.reported_host += row.reported_host;
        f.reported_storage += std::max<int64_t>(row.reported_storage, 0);
      }
    }
    f.rows.push_back(std::move(row));
  }
  std::sort(f.rows.begin(), f.rows.end(),
            [](const FidelityRow& x, const FidelityRow& y) { return x.rid < y.rid; });
  return f;
}

namespace {

std::string row_text(const FidelityRow& r) {
  char buf[512];
  const std::string name = r.sglang_rid.empty() ? "" : " (" + r.sglang_rid.substr(0, 40) + ")";
  if (!r.admitted) {
    std::snprintf(buf, sizeof buf, "    rid %llu%s: not admitted by kvsim; SGLang cached %lld\n",
                  static_cast<unsigned long long>(r.rid), name.c_str(),
                  static_cast<long long>(r.reported));
    return buf;
  }
  std::string tiers;
  if (r.reported_device >= 0 && r.reported_host >= 0) {
    char t[200];
    std::snprintf(
        t, sizeof t, " [device %lld/%lld, host %lld/%lld%s]",
        static_cast<long long>(r.kvsim_device), static_cast<long long>(r.reported_device),
        static_cast<long long>(r.kvsim_host), static_cast<long long>(r.reported_host),
        r.reported_storage > 0 ? (", storage " + std::to_string(r.reported_storage)).c_str() : "");
    tiers = t;
  }
  std::snprintf(buf, sizeof buf, "    rid %llu%s: kvsim %lld, SGLang %lld (%+lld) of %lld%s%s\n",
                static_cast<unsigned long long>(r.rid), name.c_str(),
                static_cast<long long>(r.kvsim()), static_cast<long long>(r.reported),
                static_cast<long long>(r.diff()), static_cast<long long>(r.prompt), tiers.c_str(),
                r.stand_in ? " stand-in prompt" : "");
  return buf;
}

}  // namespace

std::string fidelity_text(const FidelityReport& f, size_t largest, size_t all_up_to) {
  char buf[512];
  std::string out;
  const double pct = f.compared == 0
                         ? 0.0
                         : 100.0 * static_cast<double>(f.exact) / static_cast<double>(f.compared);
  std::snprintf(buf, sizeof buf,
                "  fidelity vs SGLang cached_tokens: %lld of %lld requests agree exactly (%.1f%%); "
                "%zu reported, %lld not admitted by kvsim\n"
                "    hit tokens: kvsim %lld, SGLang %lld (%+lld)\n",
                static_cast<long long>(f.exact), static_cast<long long>(f.compared), pct,
                f.rows.size(),
                static_cast<long long>(static_cast<int64_t>(f.rows.size()) - f.compared),
                static_cast<long long>(f.kvsim_tokens), static_cast<long long>(f.reported_tokens),
                static_cast<long long>(f.kvsim_tokens - f.reported_tokens));
  out += buf;
  const FidelityRow* worst = nullptr;
  for (const FidelityRow& r : f.rows) {
    if (r.admitted && r.diff() != 0 &&
        (worst == nullptr || std::llabs(r.diff()) > std::llabs(worst->diff())))
      worst = &r;
  }
  if (worst != nullptr) {
    std::snprintf(buf, sizeof buf, "    largest difference: %+lld tokens (rid %llu)\n",
                  static_cast<long long>(worst->diff()),
                  static_cast<unsigned long long>(worst->rid));
    out += buf;
  }
  if (f.with_tiers > 0) {
    std::snprintf(buf, sizeof buf,
                  "    by tier (%lld requests with a split): device kvsim %lld / SGLang %lld, host "
                  "kvsim %lld / SGLang %lld + storage %lld\n",
                  static_cast<long long>(f.with_tiers), static_cast<long long>(f.kvsim_device),
                  static_cast<long long>(f.reported_device), static_cast<long long>(f.kvsim_host),
                  static_cast<long long>(f.reported_host),
                  static_cast<long long>(f.reported_storage));
    out += buf;
  }
  if (f.stand_in > 0) {
    std::snprintf(buf, sizeof buf,
                  "    %lld compared requests have stand-in prompts (text without ids): their "
                  "hits are approximate\n",
                  static_cast<long long>(f.stand_in));
    out += buf;
  }
  if (f.rows.size() <= all_up_to) {
    out += "    per request:\n";
    for (const FidelityRow& r : f.rows)
      out += row_text(r);
    return out;
  }
  std::vector<const FidelityRow*> order;
  for (const FidelityRow& r : f.rows) {
    if (r.admitted && r.diff() != 0) order.push_back(&r);
  }
  std::stable_sort(order.begin(), order.end(), [](const FidelityRow* x, const FidelityRow* y) {
    return std::llabs(x->diff()) > std::llabs(y->diff());
  });
  if (order.size() > largest) order.resize(largest);
  if (!order.empty()) {
    out += "    largest differences (--json lists every request):\n";
    for (const FidelityRow* r : order)
      out += row_text(*r);
  }
  return out;
}

nlohmann::json fidelity_json(const FidelityReport& f) {
  nlohmann::json rows = nlohmann::json::array();
  for (const FidelityRow& r : f.rows) {
    nlohmann::json j = {{"rid", r.rid}, {"prompt", r.prompt}, {"reported", r.reported}};
    if (!r.sglang_rid.empty()) j["sglang_rid"] = r.sglang_rid;
    if (r.admitted) {
      j["kvsim"] = r.kvsim();
      j["kvsim_device"] = r.kvsim_device;
      j["kvsim_host"] = r.kvsim_host;
      j["diff"] = r.diff();
    }
    if (r.reported_device >= 0) j["reported_device"] = r.reported_device;
    if (r.reported_host >= 0) j["reported_host"] = r.reported_host;
    if (r.reported_storage >= 0) j["reported_storage"] = r.reported_storage;
    if (r.stand_in) j["stand_in"] = true;
    rows.push_back(std::move(j));
  }
  return {{"reported", f.rows.size()},
          {"compared", f.compared},
          {"exact", f.exact},
          {"kvsim_hit_tokens", f.kvsim_tokens},
          {"reported_hit_tokens", f.reported_tokens},
          {"kvsim_device", f.kvsim_device},
          {"kvsim_host", f.kvsim_host},
          {"reported_device", f.reported_device},
          {"reported_host", f.reported_host},
          {"reported_storage", f.reported_storage},
          {"with_tiers", f.with_tiers},
          {"stand_in", f.stand_in},
          {"requests", rows}};
}

}  // namespace kvsim::sim
