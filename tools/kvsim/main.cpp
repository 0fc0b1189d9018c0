// kvsim: the command line. Option parsing only (CLI11 lives in this one file); the commands
// are in commands.cpp. `kvsim run` alone runs the built-in default scenario.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "tools/kvsim/cmd_hunt.h"
#include "tools/kvsim/cmd_import_sglang.h"
#include "tools/kvsim/cmd_schema.h"
#include "tools/kvsim/cmd_sglang_replay.h"
#include "tools/kvsim/commands.h"
#include "tools/kvsim/probe_report.h"
#include "tools/kvsim/target_flags.h"

namespace {

// Integer flags: "-1" must not wrap to 2^64 - 1 in an unsigned option.
const CLI::Validator kNotNegative(
    [](std::string& s) { return s.starts_with('-') ? std::string("must not be negative") : ""; },
    "NOT NEGATIVE");
// Number flags: NaN and infinities are not numbers a run can use, and a message names the
// bound in words (CLI's own range checks print DBL_MAX with all its 309 digits).
std::string number_problem(const std::string& s, bool positive) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0') return "\"" + s + "\" is not a number";
  if (!std::isfinite(v)) return "\"" + s + "\" is not a finite number";
  if (positive && !(v > 0)) return "must be greater than 0 (got " + s + ")";
  if (!positive && v < 0) return "must not be negative (got " + s + ")";
  return "";
}
const CLI::Validator kFinite([](std::string& s) { return number_problem(s, false); },
                             "NUMBER >= 0");
const CLI::Validator kPositive([](std::string& s) { return number_problem(s, true); },
                               "NUMBER > 0");

// No std::bad_alloc reaches the user as an abort: it is an out-of-memory exit.
template <typename C>
int run_guarded(int (*command)(const C&), const C& options) {
  try {
    return command(options);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "kvsim: out of memory (the configuration needs more than the machine gives; "
                 "lower the pools or the workload, or set --memory-limit lower to be told up "
                 "front)\n");
    return kvsim::tools::kExitOutOfMemory;
  } catch (const std::length_error& e) {
    std::fprintf(stderr, "kvsim: out of memory (%s)\n", e.what());
    return kvsim::tools::kExitOutOfMemory;
  }
}

// --target / --sglang-src (tools/kvsim/target_flags.h), the same on run, replay, shrink and hunt.
void add_target_flags(CLI::App* cmd, kvsim::tools::TargetFlags& flags) {
  cmd->add_option("--target", flags.target,
                  "The cache under test: kvsim (kvsim's core, the default) or sglang (SGLang's "
                  "own Python cache; docs/sglang-hunt.md)")
      ->check(CLI::IsMember({"kvsim", "sglang"}));
  cmd->add_option("--sglang-src", flags.sglang_src,
                  "With --target sglang: an SGLang source tree, 'installed', or 'bundle:<tag>' "
                  "(a replay or shrink of an SGLang trace: another tree than it recorded)");
  cmd->add_flag("--differential", flags.differential,
                "With --target sglang: run kvsim's core beside SGLang's cache on the same ops and "
                "report the first op whose decisions differ (differential.decision)");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvsim::tools;
  CLI::App app{"kvsim: a hierarchical KV-cache core and its deterministic simulation harness"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvsim ") + KVSIM_VERSION);
  app.footer(exit_code_help());

  RunCommand run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Run a scenario (default: the built-in one) through the real core under the scheduler "
      "model, checking every invariant after every op; print a summary and the event hash");
  run_cmd->add_option("scenario", run.scenario, "Scenario file (scenarios/*.json)");
  run_cmd->add_option("--seed", run.seed, "First seed (default: the scenario's)")
      ->check(kNotNegative);
  run_cmd->add_option("--seeds", run.seeds, "Sweep this many consecutive seeds")
      ->check(kNotNegative)
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
      ->capture_default_str();
  run_cmd
      ->add_option("-j,--jobs", run.jobs,
                   "Run a sweep's seeds on this many threads (results and summary are the same "
                   "for every value)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  run_cmd->add_option("--shard", run.shard,
                      "I/N: run only shard I (from 0) of N of the sweep, the seeds at positions "
                      "I, I+N, I+2N, ... (for CI matrices and batch jobs)");
  run_cmd->add_flag("--json", run.json,
                    "JSON: one document for a run; for a sweep, JSON Lines (one line per seed, "
                    "then a {\"sweep\": ...} line; docs/cli.md)");
  run_cmd->add_option("--record", run.record,
                      "Write the op trace of the run to this file (- : standard output)");
  run_cmd->add_option("--trace-dir", run.failure_trace,
                      "Folder for the op traces of failing runs (default: .)");
  run_cmd->add_option("--workload", run.workload,
                      "Run a workload trace: its arrivals under its embedded scenario (a "
                      "scenario argument must agree with it)");
  run_cmd
      ->add_option("--full-every", run.full_every,
                   "Full sanity_check every N ops (default: the scenario's)")
      ->check(kNotNegative)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  run_cmd->add_flag("--no-faults", run.no_faults, "Disable fault injection");
  run_cmd->add_flag("--no-content", run.no_content,
                    "Do not check model reads against the content oracle (for timing)");
  run_cmd->add_flag("!--no-progress", run.progress, "No progress bar on sweeps");
  run_cmd->add_flag("--stop-at-first", run.stop_at_first,
                    "Stop a sweep at the first failing seed and print a hunt summary");
  run_cmd
      ->add_option("--max-failures", run.max_failures,
                   "Stop a sweep after this many failing seeds and print a hunt summary")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}));
  run_cmd
      ->add_option("--time-budget", run.time_budget_s,
                   "Stop a sweep after this many seconds of wall time")
      ->check(kFinite);
  run_cmd->add_flag("--probes", run.probes,
                    "List the code probes the run reached and never reached (default: one line)");
  run_cmd->add_option("--report", run.report,
                      "Write the sweep as a self-contained HTML page, DIR/index.html");
  run_cmd->add_option("--timeline", run.timeline,
                      "Write the run as a Chrome Trace Event file (Perfetto, chrome://tracing)");
  const char* kMemoryHelp =
      "Refuse up front a configuration that needs more memory than this (bytes, or with K, M, "
      "G, T; default: half the physical memory)";
  run_cmd->add_option("--memory-limit", run.memory_limit, kMemoryHelp);

  add_target_flags(run_cmd, run.target);
  run_cmd->add_option("--storage-dir", run.storage_dir,
                      "Use a file store in this existing directory as the storage tier "
                      "(emptied first unless --storage-reuse; docs/storage.md)");
  run_cmd->add_flag("--storage-reuse", run.storage_reuse,
                    "Start on what the file store holds (its digest goes into traces)");

  ReplayCommand replay;
  CLI::App* replay_cmd =
      app.add_subcommand("replay",
                         "Replay a trace: an op trace bit for bit (checking its event hash and "
                         "violation), or a workload trace through the scheduler");
  replay_cmd->add_option("trace", replay.trace, "Trace file (.jsonl)")->required();
  replay_cmd->add_flag("--json", replay.json, "JSON summary");
  replay_cmd->add_flag("--expect-clean", replay.expect_clean,
                       "Exit 0 only if the replay finds no violation (regression traces)");
  replay_cmd->add_option(
      "--timeline", replay.timeline,
      "Write the replay as a Chrome Trace Event file (Perfetto, chrome://tracing)");
  replay_cmd->add_option(
      "--tree-at", replay.tree_at,
      "Draw the radix tree after op N (numbered from 1, as a run summary's \"after op N\"; "
      "Graphviz DOT)");
  replay_cmd->add_option("--format", replay.tree_format, "Tree picture format: dot or svg")
      ->check(CLI::IsMember({"dot", "svg"}))
      ->capture_default_str();
  replay_cmd->add_option(
      "--tree-out", replay.tree_out,
      "Where --tree-at writes the picture (default: <trace>.op<N>.tree.<format>)");
  replay_cmd->add_option("--memory-limit", replay.memory_limit, kMemoryHelp);
  add_target_flags(replay_cmd, replay.target);

  ShrinkCommand shrink;
  CLI::App* shrink_cmd = app.add_subcommand(
      "shrink", "Minimise a failing op trace by delta debugging, keeping the same violation");
  shrink_cmd->add_option("trace", shrink.trace, "Failing op trace")->required();
  shrink_cmd->add_option("-o,--out", shrink.out, "Where to write the shrunk trace")->required();
  shrink_cmd->add_option("--max-replays", shrink.max_replays, "Replay budget")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
      ->capture_default_str();
  shrink_cmd->add_flag("--json", shrink.json, "JSON summary");
  shrink_cmd->add_option("--memory-limit", shrink.memory_limit, kMemoryHelp);
  add_target_flags(shrink_cmd, shrink.target);

  GenCommand gen;
  CLI::App* gen_cmd =
      app.add_subcommand("gen", "Generate a scenario's workload for a seed as a workload trace");
  gen_cmd->add_option("scenario", gen.scenario, "Scenario file (default: the built-in one)");
  gen_cmd->add_option("--seed", gen.seed, "Seed (default: the scenario's)")->check(kNotNegative);
  gen_cmd->add_option("-o,--out", gen.out, "Output file (- : standard output)")->required();
  gen_cmd->add_option("--memory-limit", gen.memory_limit, kMemoryHelp);

  ImportMooncakeCommand imp;
  CLI::App* imp_cmd =
      app.add_subcommand("import-mooncake",
                         "Convert a Mooncake trace (timestamp, input_length, output_length, "
                         "hash_ids per line) into a workload trace");
  imp_cmd->add_option("input", imp.in, "Mooncake JSONL file")->required();
  imp_cmd->add_option("-o,--out", imp.out, "Output workload trace")->required();
  imp_cmd->add_option("--scenario", imp.scenario, "Scenario to embed (default: page = block)");
  imp_cmd->add_option("--block-tokens", imp.block_tokens, "Tokens per hash id")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  imp_cmd->add_option("--ms-per-tick", imp.ms_per_tick, "Timestamp milliseconds per tick")
      ->check(kPositive)
      ->capture_default_str();
  imp_cmd->add_option("--limit", imp.limit, "Import only the first N requests (0 = all)")
      ->check(kNotNegative);
  imp_cmd->add_option("--memory-limit", imp.memory_limit, kMemoryHelp);

  ProbesCommand probes_opts;
  CLI::App* probes_cmd = app.add_subcommand(
      "probes",
      "List the code probes of the core (core/common/probe_list.h); docs/probes.md is "
      "`kvsim probes --markdown`");
  probes_cmd->add_flag("--markdown", probes_opts.markdown, "Print docs/probes.md");
  probes_cmd->add_flag("--json", probes_opts.json, "Print the list as JSON");

  SchemaCommand schema_opts;
  CLI::App* schema_cmd = app.add_subcommand(
      "schema",
      "Print the scenario format as a JSON Schema (draft 2020-12) for editors; --markdown: "
      "docs/scenario-reference.md. Both come from the parser's field table");
  schema_cmd->add_flag("--markdown", schema_opts.markdown, "Print docs/scenario-reference.md");

  HuntCommand hunt;
  CLI::App* hunt_cmd = app.add_subcommand(
      "hunt",
      "Hunt blind for violations: swarm configurations drawn per seed and the named scenarios, "
      "round-robin; shrink each failure; exit 1 when one is found");
  hunt_cmd->add_option("--time-budget", hunt.time_budget_s, "Wall-time budget in seconds")
      ->check(kFinite)
      ->capture_default_str();
  add_target_flags(hunt_cmd, hunt.target);
  hunt_cmd->add_option("--seed", hunt.seed, "Base seed (unit i runs seed S + i)")
      ->check(kNotNegative)
      ->capture_default_str();
  hunt_cmd->add_option("--failures", hunt.failures, "Stop after this many failures")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}))
      ->capture_default_str();
  CLI::Option* until = hunt_cmd->add_option(
      "--until", hunt.until,
      "Also stop at the first failure of this invariant (the hunt still draws blind; with "
      "--failures N it stops after N failures of any kind too)");
  hunt_cmd
      ->add_option("--until-detail", hunt.until_detail,
                   "With --until: only a failure of that invariant whose detail contains this text")
      ->needs(until);
  hunt_cmd->add_option("-j,--jobs", hunt.jobs, "Worker processes")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  hunt_cmd->add_flag("--json", hunt.json, "One JSON document: the hunt summary and its probes");
  hunt_cmd->add_flag("--probes", hunt.probes,
                     "List the code probes the hunt reached and never reached (default: one line)");
  hunt_cmd->add_option("--trace-dir", hunt.trace_dir, "Folder for failing and shrunk traces")
      ->capture_default_str();
  hunt_cmd->add_flag("--no-shrink", hunt.no_shrink, "Do not shrink failures");
  hunt_cmd
      ->add_option("--shrink-ops", hunt.shrink_ops,
                   "Ops one shrink may replay, all its replays together (0 = no limit): bounds "
                   "the time spent shrinking a long trace, deterministically")
      ->check(kNotNegative)
      ->capture_default_str();
  hunt_cmd
      ->add_option(
          "--unit-timeout", hunt.unit_timeout_s,
          "Wall seconds one unit (seed run) may take; longer is a 'hang' failure (0 = none; "
          "default 30, or 120 with --target sglang)")
      ->check(kFinite);
  hunt_cmd->add_option("--report", hunt.report,
                       "Write a self-contained HTML report of the hunt to this folder");
  hunt_cmd->add_option("--units", hunt.units, "Stop after this many units (0 = no limit)")
      ->check(kNotNegative);
  hunt_cmd->add_option("--scenarios", hunt.scenarios,
                       "Folder of named scenarios (default: ./scenarios, else the source tree's)");
  hunt_cmd
      ->add_option("--print-unit", hunt.print_unit,
                   "Print unit N's scenario as JSON (what the hunt would run, fitted to the "
                   "target) and run nothing; kvsim run FILE --seed S+N runs it")
      ->check(kNotNegative);

  // Everything after the subcommand goes to the Python importer as is (its own --help).
  CLI::App* sglang_cmd = app.add_subcommand(
      "import-sglang",
      "Convert SGLang crash dumps (--crash-dump-folder) and request dumps "
      "(--dump-requests-folder) into a workload trace with SGLang's reported cached tokens "
      "(safe unpickling; needs python3; see docs/sglang.md)");
  sglang_cmd->prefix_command();
  sglang_cmd->set_help_flag();

  SglangReplayCommand sgl;
  CLI::App* sgl_cmd = app.add_subcommand(
      "sglang-replay",
      "Replay a Mooncake trace as SGLang's RadixCache op stream (match, lock, evict the "
      "shortfall, insert, unlock) on the core; print hit rate and ops/s, optionally the "
      "per-request CSV of the SGLang oracle or a row-by-row comparison with one");
  sgl_cmd->add_option("trace", sgl.trace, "Mooncake JSONL file")->required();
  sgl_cmd->add_option("--page-size", sgl.page_size, "Tokens per page")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sgl_cmd->add_option("--capacity-tokens", sgl.capacity_tokens, "KV slots (<= 0: unlimited)")
      ->capture_default_str();
  sgl_cmd->add_option("--tail", sgl.tail, "Partial last block: unique or hash")
      ->capture_default_str();
  sgl_cmd->add_flag("--with-output", sgl.with_output, "Insert input + output tokens");
  sgl_cmd->add_flag("--server-match-limit", sgl.server_match_limit,
                    "Match at most input_len - 1 tokens");
  sgl_cmd->add_option("--limit", sgl.limit, "First N requests only (0 = all)")->check(kNotNegative);
  sgl_cmd->add_option("--repeat", sgl.repeat, "Fresh replays in this process (first = fresh)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  sgl_cmd->add_option("--per-request-out", sgl.per_request_out, "Write the per-request CSV");
  sgl_cmd->add_option("--compare", sgl.compare,
                      "Compare every request with this oracle CSV (exit 1 on any difference)");
  sgl_cmd->add_flag("--json", sgl.json, "One JSON summary");

  // A first word that is neither a flag nor a subcommand is named (CLI11 would only say that
  // a subcommand is required).
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known |= sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "kvsim: unknown subcommand \"%s\" (one of: %s; see kvsim --help)\n",
                   argv[1], names.c_str());
      return static_cast<int>(CLI::ExitCodes::ExtrasError);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the message (or the help)
    // A value of the wrong type ("--seed abc") is a bad value like one out of range: 105, as
    // docs/cli.md says, not CLI11's separate conversion code 104.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::ConversionError)) {
      return static_cast<int>(CLI::ExitCodes::ValidationError);
    }
    return code;
  }
  if (sglang_cmd->parsed()) return import_sglang_command(sglang_cmd->remaining());
  if (hunt_cmd->parsed()) return run_guarded(hunt_command, hunt);
  if (sgl_cmd->parsed()) return run_guarded(sglang_replay_command, sgl);
  if (run_cmd->parsed()) return run_guarded(run_command, run);
  if (replay_cmd->parsed()) return run_guarded(replay_command, replay);
  if (gen_cmd->parsed()) return run_guarded(gen_command, gen);
  if (shrink_cmd->parsed()) return run_guarded(shrink_command, shrink);
  if (imp_cmd->parsed()) return run_guarded(import_mooncake_command, imp);
  if (probes_cmd->parsed()) return run_guarded(probes_command, probes_opts);
  if (schema_cmd->parsed()) return run_guarded(schema_command, schema_opts);
  return kExitInput;
}
