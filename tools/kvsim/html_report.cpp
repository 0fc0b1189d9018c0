#include "tools/kvsim/html_report.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "sim/base/json_reader.h"
#include "sim/model/faults.h"

namespace kvsim::tools::html {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.violation td,tr.hang td{background:#fde2e2}tr.vacuous td{background:#fff5d6}
code{background:#f4f4f4;padding:0 .2em}
.ok{color:#1a7f37}.bad{color:#cf222e;font-weight:bold}
)";

}  // namespace

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

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string link(const std::string& dir, const std::string& path) {
  if (path.empty()) return "";
  std::error_code ec;
  fs::path rel = fs::relative(fs::absolute(path, ec), fs::absolute(dir, ec), ec);
  const std::string href = ec || rel.empty() ? path : rel.string();
  return "<a href=\"" + esc(href) + "\">" + esc(fs::path(path).filename().string()) + "</a>";
}

std::string page_begin(const std::string& title, const std::string& command) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) +
         "</title><style>" + kStyle + "</style></head><body>\n<h1>" + esc(title) +
         "</h1>\n<p><code>" + esc(command) + "</code></p>\n";
}

std::string page_end() {
  return "</body></html>\n";
}

std::map<std::string, std::pair<int64_t, int64_t>> all_fault_sites() {
  std::map<std::string, std::pair<int64_t, int64_t>> faults;
  for (size_t i = 0; i < sim::kFaultSites; ++i) {
    const std::string_view name = sim::to_string(static_cast<sim::FaultSite>(i));
    if (name != "?") faults[std::string(name)] = {0, 0};  // "?": a free number, no site
  }
  return faults;
}

std::string fault_table(const std::map<std::string, std::pair<int64_t, int64_t>>& faults,
                        const std::string& runs_word) {
  std::ostringstream o;
  o << "<h2>Fault sites</h2>\n<table id=\"faults\"><tr><th>site</th><th>fired</th>"
    << "<th>" << esc(runs_word) << " where it fired</th></tr>\n";
  for (const auto& [site, f] : faults) {
    o << "<tr><td>" << esc(site) << "</td><td class=\"num\">" << f.first
      << "</td><td class=\"num\">" << f.second << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

std::string probe_section(const probes::Snapshot& probes, const std::string& over) {
  size_t reached = 0;
  for (const probes::Count& p : probes)
    reached += p.count > 0;
  std::ostringstream o;
  o << "<h2>Code probes</h2>\n<p id=\"probes-about\">A code probe marks a rare path of the core "
    << "(a split under a lock, a load-back cut short, ...; docs/probes.md). The table counts how "
    << "often " << esc(over) << " took each path: it measures what was <em>exercised</em>, not "
    << "what failed. A shaded row (0 hits) is a path this run did not test; "
    << "<code>tools/probe_sweep.sh</code> checks that CI reaches every one. " << reached << " of "
    << probes.size() << " reached.</p>\n"
    << "<table id=\"probes\"><tr><th>probe</th><th>hits</th><th>what reaching it means</th>"
    << "</tr>\n";
  for (const probes::Count& p : probes) {
    std::string meaning;
    for (const probes::Info& i : probes::all()) {
      if (i.name == p.name) meaning = std::string(i.meaning);
    }
    o << "<tr" << (p.count == 0 ? " class=\"vacuous\"" : "") << "><td>" << esc(std::string(p.name))
      << "</td><td class=\"num\">" << p.count << "</td><td>" << esc(meaning) << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

void make_report_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw sim::InputError("--report: " + dir + ": cannot create the folder: " + ec.message());
  if (!fs::is_directory(dir)) throw sim::InputError("--report: " + dir + ": not a folder");
}

std::string write_page(const std::string& dir, const std::string& page) {
  make_report_dir(dir);
  const std::string path = (fs::path(dir) / "index.html").string();
  std::ofstream out(path);
  out << page;
  if (!out) throw sim::InputError("--report: " + path + ": cannot write");
  return path;
}

}  // namespace kvsim::tools::html
