#include "sim/trace/trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <istream>
#include <sstream>

#include "sim/base/json_reader.h"

namespace kvsim::sim {
namespace {

nlohmann::json header(const char* kind, const Scenario& s, uint64_t seed) {
  return {{"kvsim_trace", kTraceVersion}, {"kind", kind}, {"seed", seed}, {"scenario", to_json(s)}};
}

// "-" writes to standard output. A file is written under a temporary name and renamed into
// place, so a failure never leaves a partial trace behind.
void write_lines(const std::string& path, const std::vector<nlohmann::json>& lines) {
  if (path == "-") {
    for (const nlohmann::json& j : lines)
      std::cout << j.dump() << '\n';
    std::cout.flush();
    if (!std::cout) throw InputError("-: write error on standard output");
    return;
  }
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path + ": cannot create file: " + std::strerror(errno));
    for (const nlohmann::json& j : lines)
      out << j.dump() << '\n';
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path + ": write error");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot write: " + std::strerror(err));
  }
}

nlohmann::json violation_json(const SimViolation& v) {
  return {{"invariant", v.invariant}, {"detail", v.detail}, {"op_index", v.op_index}};
}

uint64_t parse_hex64(const std::string& hex, const JsonReader& r, const std::string& key) {
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    r.fail(key, "expected 16 hex digits");
  }
  return std::stoull(hex, nullptr, 16);
}

nlohmann::json reported_json(const ReportedCache& c) {
  nlohmann::json j = nlohmann::json::object();
  const std::pair<const char*, int64_t> counts[] = {{"cached_tokens", c.cached_tokens},
                                                    {"device", c.device},
                                                    {"host", c.host},
                                                    {"storage", c.storage},
                                                    {"prompt_tokens", c.prompt_tokens}};
  for (const auto& [name, v] : counts) {
    if (v >= 0) j[name] = v;
  }
  if (!c.sglang_rid.empty()) j["sglang_rid"] = c.sglang_rid;
  if (c.stand_in) j["stand_in"] = true;
  return j;
}

// An arrival's optional "reported" object (written by kvsim import-sglang).
ReportedCache parse_reported(JsonReader r) {
  ReportedCache c;
  c.cached_tokens = r.integer("cached_tokens", -1, 0, INT64_MAX);
  c.device = r.integer("device", -1, 0, INT64_MAX);
  c.host = r.integer("host", -1, 0, INT64_MAX);
  c.storage = r.integer("storage", -1, 0, INT64_MAX);
  c.prompt_tokens = r.integer("prompt_tokens", -1, 0, INT64_MAX);
  c.sglang_rid = r.string("sglang_rid", "");
  c.stand_in = r.boolean("stand_in", false);
  r.finish();
  return c;
}

}  // namespace

nlohmann::json arrival_json(const Arrival& a) {
  nlohmann::json j = {{"rid", a.rid}, {"tick", a.tick}, {"ns", a.ns}};
  // Compact when the arrival knows how its prompt was made; tokens otherwise.
  if (!a.recipe.empty()) {
    j["segments"] = recipe_json(a.recipe);
  } else {
    j["prompt"] = a.prompt.vec();
  }
  j["output_len"] = a.output_len;
  if (a.abort_at >= 0) j["abort_at"] = a.abort_at;
  if (a.reported) j["reported"] = reported_json(*a.reported);
  return j;
}

void write_workload_trace(const std::string& path, const WorkloadTrace& trace) {
  WorkloadTraceWriter w(path, trace.scenario, trace.seed);
  for (const Arrival& a : trace.arrivals)
    w.add(a);
  w.close();
}

// Like write_lines: "-" is standard output; a file is written under a temporary name and
// renamed into place by close(), so a failure never leaves a partial trace behind.
WorkloadTraceWriter::WorkloadTraceWriter(const std::string& path, const Scenario& scenario,
                                         uint64_t seed)
    : path_(path) {
  if (path != "-") {
    tmp_ = path + ".partial";
    file_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!file_) throw InputError(path + ": cannot create file: " + std::strerror(errno));
  }
  out() << header("workload", scenario, seed).dump() << '\n';
}

WorkloadTraceWriter::~WorkloadTraceWriter() {
  if (!closed_ && !tmp_.empty()) {
    file_.close();
    std::remove(tmp_.c_str());
  }
}

std::ostream& WorkloadTraceWriter::out() {
  return tmp_.empty() ? std::cout : file_;
}

void WorkloadTraceWriter::add(const Arrival& a) {
  out() << arrival_json(a).dump() << '\n';
  ++count_;
}

void WorkloadTraceWriter::close() {
  out().flush();
  if (!out())
    throw InputError(path_ == "-" ? "-: write error on standard output" : path_ + ": write error");
  closed_ = true;
  if (tmp_.empty()) return;
  file_.close();
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    throw InputError(path_ + ": cannot write: " + std::strerror(err));
  }
}

void write_op_trace(const std::string& path, const OpTrace& trace) {
  std::vector<nlohmann::json> lines{header("ops", trace.scenario, trace.seed)};
  // A run of another cache names it (and the commit it ran), so a replay runs the same code.
  if (!trace.target.is_kvsim()) lines.front()["target"] = to_json(trace.target);
  if (trace.violation) lines.front()["violation"] = violation_json(*trace.violation);
  const bool chained = trace.checks.size() == trace.ops.size();
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    nlohmann::json j = to_json(trace.ops[i]);
    if (chained) {
      if (!trace.checks[i].ok) j["ok"] = false;
      j["h"] = hex64(trace.checks[i].hash);
    }
    lines.push_back(std::move(j));
  }
  nlohmann::json end = {{"ops", trace.ops.size()}};
  if (trace.ticks) end["ticks"] = *trace.ticks;
  if (trace.faults_fired) {
    nlohmann::json faults = nlohmann::json::object();
    for (size_t i = 0; i < kFaultSites; ++i) {
      if ((*trace.faults_fired)[i] > 0) {
        faults[std::string(to_string(static_cast<FaultSite>(i)))] = (*trace.faults_fired)[i];
      }
    }
    end["faults_fired"] = faults;
  }
  if (trace.event_hash) end["event_hash"] = hex64(*trace.event_hash);
  end["violation"] = trace.violation ? violation_json(*trace.violation) : nlohmann::json();
  lines.push_back({{"end", end}});
  write_lines(path, lines);
}

namespace {

// Reads a trace line by line from `in`; `path` names the source in every error.
AnyTrace read_trace_stream(std::istream& in, const std::string& path) {
  AnyTrace trace;
  std::string line;
  size_t line_no = 0;
  bool ended = false;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no);
    if (line.empty() && line_no == 1) throw InputError(where + ": expected the trace header");
    if (line.empty()) continue;
    if (ended) throw InputError(where + ": content after the end record");
    const nlohmann::json doc = parse_json(line, path, line_no);
    if (line_no == 1) {
      JsonReader r(doc, where);
      const int64_t version = r.required_integer("kvsim_trace", 1, INT32_MAX);
      if (version != 1 && version != kTraceVersion) {
        r.fail("kvsim_trace", "version " + std::to_string(version) +
                                  " is not supported (this "
                                  "kvsim reads versions 1 to " +
                                  std::to_string(kTraceVersion) + ")");
      }
      trace.ops.version = version;
      trace.kind = r.choice("kind", "", {"workload", "ops"});
      const uint64_t seed = static_cast<uint64_t>(r.required_integer("seed", 0, INT64_MAX));
      if (!r.has("scenario")) r.fail("scenario", "missing");
      const Scenario s =
          parse_scenario(r.raw("scenario"), where + " (scenario)", ScenarioUse::kReplay);
      r.raw("violation");  // informational; the footer carries the same
      r.raw("import");     // informational: what kvsim import-sglang mapped and could not
      if (r.has("target")) trace.ops.target = target_from_json(r.raw("target"), where);
      r.finish();
      trace.workload.scenario = trace.ops.scenario = s;
      trace.workload.seed = trace.ops.seed = seed;
      continue;
    }
    if (trace.kind == "workload") {
      JsonReader r(doc, where);
      Arrival a;
      a.rid = static_cast<RequestId>(r.required_integer("rid", 1, INT64_MAX));
      a.tick = static_cast<uint64_t>(r.required_integer("tick", 0, INT64_MAX));
      a.ns = static_cast<Namespace>(r.integer("ns", 0, 0, INT64_MAX));
      // A prompt is its tokens ("prompt", every version) or its recipe ("segments", compact;
      // expanded only when the request arrives). Exactly one of the two.
      if (r.has("segments") == r.has("prompt")) {
        r.fail("prompt", "expected exactly one of prompt (tokens) and segments (a recipe)");
      }
      if (r.has("segments")) {
        a.recipe = recipe_from_json(r.raw("segments"), where, r.field("segments"));
      } else {
        std::vector<Token> prompt;
        for (int64_t t : r.integer_array("prompt", 0, INT32_MAX))
          prompt.push_back(static_cast<Token>(t));
        if (prompt.empty()) r.fail("prompt", "is empty");
        a.prompt = Tokens(std::move(prompt));
      }
      a.output_len = r.required_integer("output_len", 1, 1 << 24);
      a.abort_at = r.integer("abort_at", -1, 0, 1 << 24);
      if (a.abort_at > a.output_len) r.fail("abort_at", "is past output_len");
      if (r.has("reported")) a.reported = parse_reported(r.object("reported"));
      r.finish();
      if (!trace.workload.arrivals.empty() && a.tick < trace.workload.arrivals.back().tick) {
        r.fail("tick", "goes backwards");
      }
      const int64_t max_ticks = trace.workload.scenario.scheduler.max_ticks;
      if (static_cast<int64_t>(a.tick) > max_ticks) {
        r.fail("tick", std::to_string(a.tick) + " is past scheduler.max_ticks (" +
                           std::to_string(max_ticks) + ") of the trace's scenario");
      }
      trace.workload.arrivals.push_back(std::move(a));
      continue;
    }
    if (doc.is_object() && doc.contains("end")) {
      JsonReader r(doc, where);
      JsonReader end = r.object("end");
      const int64_t ops = end.required_integer("ops", 0, INT64_MAX);
      const bool chained = !trace.ops.checks.empty();
      // With a hash chain, a missing or extra op is found (and named) by the replay.
      if (ops != static_cast<int64_t>(trace.ops.ops.size()) && !chained) {
        end.fail("ops", "says " + std::to_string(ops) + " but the trace holds " +
                            std::to_string(trace.ops.ops.size()) + " (truncated?)");
      }
      trace.ops.declared_ops = ops;
      trace.ops.end_line = line_no;
      if (end.has("ticks")) trace.ops.ticks = end.integer("ticks", 0, 0, INT64_MAX);
      if (end.has("faults_fired")) {
        JsonReader f = end.object("faults_fired");
        std::array<uint64_t, kFaultSites> fired{};
        for (size_t i = 0; i < kFaultSites; ++i) {
          fired[i] = static_cast<uint64_t>(
              f.integer(std::string(to_string(static_cast<FaultSite>(i))), 0, 0, INT64_MAX));
        }
        f.finish();
        trace.ops.faults_fired = fired;
      }
      const std::string hash = end.string("event_hash", "");
      if (!hash.empty()) trace.ops.event_hash = parse_hex64(hash, end, "event_hash");
      const nlohmann::json& v = end.raw("violation");
      if (!v.is_null()) {
        JsonReader vr(v, where, "end.violation");
        trace.ops.violation =
            SimViolation{vr.required_string("invariant"), vr.string("detail", ""),
                         static_cast<size_t>(vr.integer("op_index", 0, 0, INT64_MAX))};
        vr.finish();
      }
      end.finish();
      r.finish();
      ended = true;
      continue;
    }
    // Version 2: the recorded outcome and hash chain ("ok", "h") ride on the op line.
    nlohmann::json op_doc = doc;
    std::optional<OpCheck> check;
    if (trace.ops.version >= 2 && op_doc.is_object() && op_doc.contains("h")) {
      JsonReader r(op_doc, where);
      check = OpCheck{.hash = parse_hex64(r.string("h", ""), r, "h"), .ok = r.boolean("ok", true)};
      op_doc.erase("h");
      op_doc.erase("ok");
    }
    // The first op decides whether the trace has a chain; every op after it must agree.
    if (!trace.ops.ops.empty() && check.has_value() != !trace.ops.checks.empty()) {
      throw InputError(where + ": field h: " +
                       (check ? std::string("this op has a hash but the ops before it have none")
                              : std::string("missing (the ops before this one carry the hash "
                                            "chain)")));
    }
    trace.ops.ops.push_back(op_from_json(op_doc, where));
    trace.ops.lines.push_back(line_no);
    if (check) trace.ops.checks.push_back(*check);
  }
  if (in.bad()) throw InputError(path + ": read error");
  if (line_no == 0) throw InputError(path + ": empty file (no header)");
  trace.ops.source = path;
  if (trace.kind == "ops" && !ended) {
    throw InputError(path + ":" + std::to_string(line_no) +
                     ": the op trace ends without its end record (cut short?); " +
                     std::to_string(trace.ops.ops.size()) + " ops read");
  }
  if (trace.kind == "workload" && trace.workload.arrivals.empty()) {
    throw InputError(path + ": workload trace has no arrivals");
  }
  return trace;
}

}  // namespace

AnyTrace read_trace(const std::string& path) {
  return read_trace_text(read_text_file(path), path);
}

AnyTrace read_trace_text(const std::string& text, const std::string& source) {
  std::istringstream in(text, std::ios::binary);
  return read_trace_stream(in, source);
}

}  // namespace kvsim::sim
