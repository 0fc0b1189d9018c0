#include "tools/kvsim/sweep_report.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/faults.h"
#include "sim/json_reader.h"

namespace kvsim::tools {
namespace {

namespace fs = std::filesystem;

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string pct(int64_t part, int64_t whole) {
  if (whole <= 0) return "–";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

// A link from the page in `dir` to `path` (relative when possible).
std::string link(const std::string& dir, const std::string& path) {
  if (path.empty()) return "";
  std::error_code ec;
  fs::path rel = fs::relative(fs::absolute(path, ec), fs::absolute(dir, ec), ec);
  const std::string href = ec || rel.empty() ? path : rel.string();
  return "<a href=\"" + esc(href) + "\">" + esc(fs::path(path).filename().string()) + "</a>";
}

int64_t num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<int64_t>() : 0;
}

constexpr const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.violation td{background:#fde2e2}tr.vacuous td{background:#fff5d6}
code{background:#f4f4f4;padding:0 .2em}
.ok{color:#1a7f37}.bad{color:#cf222e;font-weight:bold}
)";

}  // namespace

std::string SweepReport::html(const std::string& dir, const probes::Snapshot& probes) const {
  int64_t failures = 0, vacuous = 0, ops = 0, prompt = 0, device_hit = 0, host_hit = 0,
          storage_hit = 0, invariant_checks = 0, full_checks = 0, content_checks = 0, finished = 0,
          aborted = 0, retracted = 0;
  std::map<std::string, int64_t> invariants_failed;
  std::map<std::string, std::pair<int64_t, int64_t>> faults;  // site → (fired, seeds)
  for (size_t i = 0; i < sim::kFaultSites; ++i)
    faults[std::string(sim::to_string(static_cast<sim::FaultSite>(i)))] = {0, 0};
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
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>kvsim sweep: " << esc(scenario_) << "</title><style>" << kStyle
    << "</style></head><body>\n";
  o << "<h1>kvsim sweep: " << esc(scenario_) << "</h1>\n<p><code>" << esc(command_)
    << "</code></p>\n";
  o << "<table id=\"summary\"><tr><th>seeds</th><th>ok</th><th>violations</th><th>vacuous</th>"
    << "<th>ops</th></tr><tr><td class=\"num\">" << seeds << "</td><td class=\"num\">"
    << seeds - failures - vacuous << "</td><td class=\"num " << (failures ? "bad" : "ok") << "\">"
    << failures << "</td><td class=\"num\">" << vacuous << "</td><td class=\"num\">" << ops
    << "</td></tr></table>\n";

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

  o << "<h2>Fault sites</h2>\n<table id=\"faults\"><tr><th>site</th><th>fired</th>"
    << "<th>seeds where it fired</th></tr>\n";
  for (const auto& [site, f] : faults) {
    o << "<tr><td>" << esc(site) << "</td><td class=\"num\">" << f.first
      << "</td><td class=\"num\">" << f.second << "</td></tr>\n";
  }
  o << "</table>\n";

  size_t reached = 0;
  for (const probes::Count& p : probes)
    reached += p.count > 0;
  o << "<h2>Code probes</h2>\n<p>" << reached << " of " << probes.size()
    << " reached over the sweep.</p>\n<table id=\"probes\"><tr><th>probe</th><th>hits</th></tr>\n";
  for (const probes::Count& p : probes) {
    o << "<tr" << (p.count == 0 ? " class=\"vacuous\"" : "") << "><td>" << esc(std::string(p.name))
      << "</td><td class=\"num\">" << p.count << "</td></tr>\n";
  }
  o << "</table>\n";

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
  o << "</body></html>\n";
  return o.str();
}

std::string SweepReport::write(const std::string& dir, const probes::Snapshot& probes) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw sim::InputError("--report: " + dir + ": cannot create the folder: " + ec.message());
  const std::string path = (fs::path(dir) / "index.html").string();
  std::ofstream out(path);
  out << html(dir, probes);
  if (!out) throw sim::InputError("--report: " + path + ": cannot write");
  return path;
}

}  // namespace kvsim::tools
