#include "tools/kvsim/sweep_report.h"

#include <map>
#include <sstream>

#include "tools/kvsim/html_report.h"

namespace kvsim::tools {
namespace {

using html::esc;
using html::link;
using html::pct;

int64_t num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<int64_t>() : 0;
}

}  // namespace

std::string SweepReport::html(const std::string& dir, const probes::Snapshot& probes, unsigned jobs,
                              double wall_s) const {
  int64_t failures = 0, vacuous = 0, ops = 0, prompt = 0, device_hit = 0, host_hit = 0,
          storage_hit = 0, invariant_checks = 0, full_checks = 0, content_checks = 0, finished = 0,
          aborted = 0, retracted = 0;
  std::map<std::string, int64_t> invariants_failed;
  auto faults = html::all_fault_sites();  // site → (fired, seeds)
  for (const nlohmann::json& r : runs_) {
    const std::string verdict = r.value("verdict", r.value("ok", false) ? "ok" : "violation");
    failures += verdict == "violation";
    vacuous += verdict == "vacuous";
    ops += num(r, "ops");
    prompt += num(r, "prompt_tokens");
    device_hit += num(r, "device_hit_tokens");
    host_hit += num(r, "host_hit_tokens");
    storage_hit += num(r, "storage_hit_tokens");
    invariant_checks += num(r, "invariant_checks");
    full_checks += num(r, "full_checks");
    content_checks += num(r, "content_checks");
    finished += num(r, "finished");
    aborted += num(r, "aborted");
    retracted += num(r, "retracted");
    if (r.contains("violation")) invariants_failed[r["violation"].value("invariant", "?")]++;
    if (r.contains("faults_fired")) {
      for (const auto& [site, n] : r["faults_fired"].items()) {
        faults[site].first += n.get<int64_t>();
        faults[site].second += 1;
      }
    }
  }
  const int64_t seeds = static_cast<int64_t>(runs_.size());
  std::ostringstream o;
  o << html::page_begin("kvsim sweep: " + scenario_, command_);
  o << "<table id=\"summary\"><tr><th>seeds</th><th>ok</th><th>violations</th><th>vacuous</th>"
    << "<th>ops</th><th>wall time</th><th>threads (-j)</th></tr><tr><td class=\"num\">" << seeds
    << "</td><td class=\"num\">" << seeds - failures - vacuous << "</td><td class=\"num "
    << (failures ? "bad" : "ok") << "\">" << failures << "</td><td class=\"num\">" << vacuous
    << "</td><td class=\"num\">" << ops << "</td><td class=\"num\">" << html::seconds(wall_s)
    << "</td><td class=\"num\">" << jobs << "</td></tr></table>\n";

  o << "<h2>Failures</h2>\n";
  if (failures == 0) {
    o << "<p class=\"ok\" id=\"no-failures\">No seed failed.</p>\n";
  } else {
    o << "<table id=\"failures\"><tr><th>seed</th><th>invariant</th><th>after op</th>"
      << "<th>detail</th><th>op trace</th><th>tree at failure</th><th>replay / shrink</th></tr>\n";
    for (const nlohmann::json& r : runs_) {
      if (!r.contains("violation")) continue;
      const std::string trace = r.value("trace", "");
      std::string tree = r.value("tree", "");
      if (const auto sp = tree.find(' '); sp != std::string::npos) tree.resize(sp);
      o << "<tr class=\"violation\"><td class=\"num\">" << num(r, "seed") << "</td><td>"
        << esc(r["violation"].value("invariant", "")) << "</td><td class=\"num\">"
        << num(r["violation"], "op_index") << "</td><td>" << esc(r["violation"].value("detail", ""))
        << "</td><td>" << link(dir, trace) << "</td><td>" << link(dir, tree)
        << "</td><td><code>kvsim replay " << esc(trace) << "</code><br><code>kvsim shrink "
        << esc(trace) << " -o shrunk.trace.jsonl</code></td></tr>\n";
    }
    o << "</table>\n";
  }

  o << "<h2>Seeds</h2>\n<table id=\"seeds\"><tr><th>seed</th><th>verdict</th><th>event hash</th>"
    << "<th>ops</th><th>finished</th><th>hit rate</th><th>invariant</th></tr>\n";
  for (const nlohmann::json& r : runs_) {
    const std::string verdict = r.value("verdict", r.value("ok", false) ? "ok" : "violation");
    o << "<tr class=\"" << esc(verdict) << "\"><td class=\"num\">" << num(r, "seed") << "</td><td>"
      << esc(verdict) << "</td><td><code>" << esc(r.value("event_hash", ""))
      << "</code></td><td class=\"num\">" << num(r, "ops") << "</td><td class=\"num\">"
      << num(r, "finished") << "</td><td class=\"num\">"
      << pct(num(r, "device_hit_tokens") + num(r, "host_hit_tokens"), num(r, "prompt_tokens"))
      << "</td><td>" << (r.contains("violation") ? esc(r["violation"].value("invariant", "")) : "")
      << "</td></tr>\n";
  }
  o << "</table>\n";

  o << "<h2>Invariant checks</h2>\n<table id=\"checks\"><tr><th>check</th><th>count</th></tr>\n"
    << "<tr><td>after-op invariants (stream lifetime, slot conservation)</td><td class=\"num\">"
    << invariant_checks << "</td></tr>\n<tr><td>full sanity checks (tree, pools, ownership)</td>"
    << "<td class=\"num\">" << full_checks << "</td></tr>\n"
    << "<tr><td>content checks (model reads against the oracle)</td><td class=\"num\">"
    << content_checks << "</td></tr>\n";
  for (const auto& [inv, n] : invariants_failed) {
    o << "<tr class=\"violation\"><td>failed: " << esc(inv) << "</td><td class=\"num\">" << n
      << "</td></tr>\n";
  }
  o << "</table>\n";

  o << html::fault_table(faults, "seeds") << html::probe_section(probes, "the sweep");

  o << "<h2>Hit rates</h2>\n<table id=\"hits\"><tr><th></th><th>tokens</th><th>of "
       "prompts</th></tr>\n"
    << "<tr><td>prompt tokens</td><td class=\"num\">" << prompt << "</td><td></td></tr>\n"
    << "<tr><td>device hits</td><td class=\"num\">" << device_hit << "</td><td class=\"num\">"
    << pct(device_hit, prompt)
    << "</td></tr>\n<tr><td>host hits (loaded back)</td><td class=\"num\">" << host_hit
    << "</td><td class=\"num\">" << pct(host_hit, prompt) << "</td></tr>\n"
    << "<tr><td>storage hits (prefetched)</td><td class=\"num\">" << storage_hit
    << "</td><td class=\"num\">" << pct(storage_hit, prompt) << "</td></tr>\n"
    << "<tr><td>requests finished / aborted / retracted</td><td class=\"num\">" << finished << " / "
    << aborted << " / " << retracted << "</td><td></td></tr>\n</table>\n";
  o << html::page_end();
  return o.str();
}

std::string SweepReport::write(const std::string& dir, const probes::Snapshot& probes,
                               unsigned jobs, double wall_s) const {
  return html::write_page(dir, html(dir, probes, jobs, wall_s));
}

}  // namespace kvsim::tools
