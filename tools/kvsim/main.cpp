// kvsim: the command line. Option parsing only (CLI11 lives in this one file); the commands
// are in commands.cpp. `kvsim run` alone runs the built-in default scenario.
#include <CLI/CLI.hpp>

#include "tools/kvsim/cmd_import_sglang.h"
#include "tools/kvsim/cmd_hunt.h"
#include "tools/kvsim/commands.h"
#include "tools/kvsim/probe_report.h"

int main(int argc, char** argv) {
  using namespace kvsim::tools;
  CLI::App app{"kvsim: a hierarchical KV-cache core and its deterministic simulation harness"};
  app.require_subcommand(1);

  RunCommand run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Run a scenario (default: the built-in one) through the real core under the scheduler "
      "model, checking every invariant after every op; print a summary and the event hash");
  run_cmd->add_option("scenario", run.scenario, "Scenario file (scenarios/*.json)");
  run_cmd->add_option("--seed", run.seed, "First seed (default: the scenario's)");
  run_cmd->add_option("--seeds", run.seeds, "Sweep this many consecutive seeds")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
      ->capture_default_str();
  run_cmd->add_flag("--json", run.json, "One JSON summary per seed");
  run_cmd->add_option("--record", run.record, "Write the op trace of the run to this file");
  run_cmd->add_option("--trace-dir", run.failure_trace,
                      "Folder for the op traces of failing runs (default: .)");
  run_cmd->add_option("--workload", run.workload, "Run on the arrivals of a workload trace");
  run_cmd
      ->add_option("--full-every", run.full_every,
                   "Full sanity_check every N ops (default: the scenario's)")
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
      ->check(CLI::NonNegativeNumber);

  ReplayCommand replay;
  CLI::App* replay_cmd =
      app.add_subcommand("replay",
                         "Replay a trace: an op trace bit for bit (checking its event hash and "
                         "violation), or a workload trace through the scheduler");
  replay_cmd->add_option("trace", replay.trace, "Trace file (.jsonl)")->required();
  replay_cmd->add_flag("--json", replay.json, "JSON summary");
  replay_cmd->add_flag("--expect-clean", replay.expect_clean,
                       "Exit 0 only if the replay finds no violation (regression traces)");

  ShrinkCommand shrink;
  CLI::App* shrink_cmd = app.add_subcommand(
      "shrink", "Minimise a failing op trace by delta debugging, keeping the same violation");
  shrink_cmd->add_option("trace", shrink.trace, "Failing op trace")->required();
  shrink_cmd->add_option("-o,--out", shrink.out, "Where to write the shrunk trace")->required();
  shrink_cmd->add_option("--max-replays", shrink.max_replays, "Replay budget")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
      ->capture_default_str();
  shrink_cmd->add_flag("--json", shrink.json, "JSON summary");

  GenCommand gen;
  CLI::App* gen_cmd =
      app.add_subcommand("gen", "Generate a scenario's workload for a seed as a workload trace");
  gen_cmd->add_option("scenario", gen.scenario, "Scenario file (default: the built-in one)");
  gen_cmd->add_option("--seed", gen.seed, "Seed (default: the scenario's)");
  gen_cmd->add_option("-o,--out", gen.out, "Output file")->required();

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
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  imp_cmd->add_option("--limit", imp.limit, "Import only the first N requests (0 = all)")
      ->check(CLI::NonNegativeNumber);

  ProbesCommand probes_opts;
  CLI::App* probes_cmd = app.add_subcommand(
      "probes",
      "List the code probes of the core (core/common/probe_list.h); docs/probes.md is "
      "`kvsim probes --markdown`");
  probes_cmd->add_flag("--markdown", probes_opts.markdown, "Print docs/probes.md");
  probes_cmd->add_flag("--json", probes_opts.json, "Print the list as JSON");

  // Everything after the subcommand goes to the Python importer as is (its own --help).
  CLI::App* sglang_cmd = app.add_subcommand(
      "import-sglang",
      "Convert SGLang crash dumps (--crash-dump-folder) and request dumps "
      "(--dump-requests-folder) into a workload trace with SGLang's reported cached tokens "
      "(safe unpickling; needs python3; see docs/sglang.md)");
  sglang_cmd->prefix_command();
  sglang_cmd->set_help_flag();

  HuntCommand hunt;
  CLI::App* hunt_cmd = app.add_subcommand(
      "hunt",
      "Hunt blind for violations: swarm configurations drawn per seed and the named scenarios, "
      "round-robin; shrink each failure; exit 1 when one is found");
  hunt_cmd->add_option("--time-budget", hunt.time_budget_s, "Wall-time budget in seconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  hunt_cmd->add_option("--seed", hunt.seed, "Base seed (unit i runs seed S + i)")
      ->capture_default_str();
  hunt_cmd->add_option("--failures", hunt.failures, "Stop after this many failures")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}))
      ->capture_default_str();
  hunt_cmd->add_option("-j,--jobs", hunt.jobs, "Worker processes")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  hunt_cmd->add_flag("--json", hunt.json, "JSON hunt summary");
  hunt_cmd->add_option("--trace-dir", hunt.trace_dir, "Folder for failing and shrunk traces")
      ->capture_default_str();
  hunt_cmd->add_flag("--no-shrink", hunt.no_shrink, "Do not shrink failures");
  hunt_cmd->add_option("--units", hunt.units, "Stop after this many units (0 = no limit)");
  hunt_cmd->add_option("--scenarios", hunt.scenarios,
                       "Folder of named scenarios (default: ./scenarios, else the source tree's)");

  CLI11_PARSE(app, argc, argv);
  if (sglang_cmd->parsed()) return import_sglang_command(sglang_cmd->remaining());
  if (hunt_cmd->parsed()) return hunt_command(hunt);
  if (run_cmd->parsed()) return run_command(run);
  if (replay_cmd->parsed()) return replay_command(replay);
  if (gen_cmd->parsed()) return gen_command(gen);
  if (shrink_cmd->parsed()) return shrink_command(shrink);
  if (imp_cmd->parsed()) return import_mooncake_command(imp);
  if (probes_cmd->parsed()) return probes_command(probes_opts);
  return 2;
}
