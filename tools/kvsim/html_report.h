// The HTML building blocks shared by the self-contained report pages (`kvsim run --report`,
// tools/kvsim/sweep_report.h; `kvsim hunt --report`, tools/kvsim/hunt_report.h): escaping,
// links relative to the page, the inline style, the fault-site and code-probe tables, and writing
// DIR/index.html with errors that name --report.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/common/probe.h"

namespace kvsim::tools::html {

std::string esc(const std::string& s);
// "12.5%" (or "–" when `whole` is not positive).
std::string pct(int64_t part, int64_t whole);
// "12.3 s".
std::string seconds(double s);
// A link from the page in `dir` to `path` (relative when possible); "" for an empty path.
std::string link(const std::string& dir, const std::string& path);
// "<!DOCTYPE html>…<body>" with the shared inline style, an <h1> title and the command line.
std::string page_begin(const std::string& title, const std::string& command);
std::string page_end();
// <table id="faults">: each site with how often it fired and in how many `runs_word` (seeds,
// units) it fired. `faults` maps site → (fired, runs).
std::string fault_table(const std::map<std::string, std::pair<int64_t, int64_t>>& faults,
                        const std::string& runs_word);
// Every named fault site (sim/model/faults.h; not the free numbers) with zero counts, to fill in.
std::map<std::string, std::pair<int64_t, int64_t>> all_fault_sites();
// "<h2>Code probes</h2>" and <table id="probes">; `over` says what the hits were summed over.
std::string probe_section(const probes::Snapshot& probes, const std::string& over);
// Creates `dir`; throws sim::InputError "--report: DIR: cannot create the folder: …".
void make_report_dir(const std::string& dir);
// Writes DIR/index.html (creating DIR); throws sim::InputError naming --report. Returns its path.
std::string write_page(const std::string& dir, const std::string& page);

}  // namespace kvsim::tools::html
