// Process isolation for the shrinker and the hunt (declared in shrink.h): a replay in a child
// process that reports each op down a pipe (so a crash of the code under test leaves the
// caller standing and says which op it died in), the crash recorder that re-runs a unit that
// killed its worker and writes its ops as a trace from the fatal-signal handler, and a shrink
// run in a child process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/json_reader.h"
#include "sim/campaign/child_process.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/shrink.h"
#include "sim/config/scenario.h"
#include "sim/model/chained_observer.h"

namespace kvsim::sim {
SimViolation crash_violation(int wait_status, size_t op_index) {
  std::string how;
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    how = "killed by signal " + std::to_string(sig);
    if (const char* name = strsignal(sig)) how += std::string(" (") + name + ")";
  } else if (WIFEXITED(wait_status)) {
    how = "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  } else {
    how = "ended";
  }
  return SimViolation{"crash", how, op_index};
}

bool is_crash(const SimViolation& v) {
  return v.invariant == "crash";
}

namespace {

// Reports each op of the child's replay down the pipe as it happens: 's' as it starts, 'a' or
// 'r' once it applied or was rejected, so the parent knows how far a child that died got.
// Hands every event on to the observer the setup installed (a test's), after its own report.
class PipeObserver : public ChainedObserver {
 public:
  explicit PipeObserver(int fd) : fd_(fd) {}
  void before_op(size_t i, const Op& op) override {
    put('s');
    ChainedObserver::before_op(i, op);
  }
  void after_op(size_t i, const Op& op, const OpOutcome& o) override {
    put(o.applied ? 'a' : 'r');
    ChainedObserver::after_op(i, op, o);
  }
  void put(char c) const {
    while (::write(fd_, &c, 1) < 0 && errno == EINTR) {
    }
  }

 private:
  int fd_;
};

}  // namespace

IsolatedReplay replay_isolated(const OpTrace& trace, const ExecutorSetup& setup) {
  const PipedChild child = fork_with_pipe("shrink", "a replay process");
  if (child.pid == 0) {
    PipeObserver observer(child.fd);
    const RunResult r = replay_ops(trace, [&](Executor& e) {
      if (setup) setup(e);
      observer.chain_onto(e);
    });
    std::string end = "E";
    end += r.violation ? nlohmann::json{{"invariant", r.violation->invariant},
                                        {"detail", r.violation->detail},
                                        {"op_index", r.violation->op_index}}
                             .dump()
                       : "null";
    for (char c : end)
      observer.put(c);
    ::close(child.fd);
    _exit(0);
  }
  std::string got;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(child.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(child.fd);
  const int status = wait_for_child(child.pid);
  IsolatedReplay out;
  out.applied.assign(trace.ops.size(), 0);
  size_t started = 0;
  size_t done = 0;  // ops that finished (applied or rejected)
  const size_t end = got.find('E');
  for (size_t i = 0; i < std::min(end, got.size()); ++i) {
    if (got[i] == 's') {
      ++started;
    } else if (done < out.applied.size()) {
      out.applied[done++] = got[i] == 'a' ? 1 : 0;
    } else {
      ++done;
    }
  }
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0 && end != std::string::npos;
  if (!clean_exit) {
    if (started > done && done < out.applied.size()) out.applied[done] = 1;  // the crashing op
    out.violation = crash_violation(status, std::min(started, trace.ops.size()));
    return out;
  }
  const nlohmann::json j = nlohmann::json::parse(got.substr(end + 1));
  if (!j.is_null()) {
    out.violation = SimViolation{j.at("invariant").get<std::string>(),
                                 j.at("detail").get<std::string>(), j.at("op_index").get<size_t>()};
  }
  return out;
}

namespace {

// The crash recorder: a child process re-runs the unit that killed its worker with an observer
// that keeps every op as it starts (so the op that crashed is the last one), and a handler for
// the fatal signals that writes what it kept as an op trace before the signal takes the process.
// Writing from a signal handler is best effort (a heap the crash corrupted can defeat it; an
// alarm bounds it): without the trace the hunt still reports the crash with its scenario.
struct CrashRecording {
  const Scenario* scenario = nullptr;
  uint64_t seed = 0;
  std::string path;
  std::vector<Op> ops;
};
CrashRecording* g_crash_recording = nullptr;  // the recorder child's, set before the run

// Keeps each op as it starts, then hands it on to the observer the setup installed (a test's).
class StartedOps : public ChainedObserver {
 public:
  void before_op(size_t i, const Op& op) override {
    g_crash_recording->ops.push_back(op);
    ChainedObserver::before_op(i, op);
  }
};

void write_crash_trace(int sig) {
  ::alarm(20);  // a handler stuck in a corrupted heap must not hold the hunt
  CrashRecording& c = *g_crash_recording;
  SimViolation v{"crash", "killed by signal " + std::to_string(sig), c.ops.size()};
  if (const char* name = strsignal(sig)) v.detail += std::string(" (") + name + ")";
  write_op_trace(
      c.path,
      OpTrace{.scenario = *c.scenario, .seed = c.seed, .ops = std::move(c.ops), .violation = v});
}

extern "C" void on_fatal_signal(int sig) {
  write_crash_trace(sig);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

bool record_crash_trace(const Scenario& scenario, uint64_t seed, const ExecutorSetup& setup,
                        const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  const pid_t pid = fork_flushed();
  if (pid < 0) return false;
  if (pid == 0) {
    static CrashRecording recording;
    recording = CrashRecording{&scenario, seed, path, {}};
    g_crash_recording = &recording;
    static std::vector<char> alt_stack(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt_stack.data();
    ss.ss_size = alt_stack.size();
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      ::sigaction(sig, &sa, nullptr);
    StartedOps observer;
    run_scenario(RunRequest{.scenario = &scenario, .seed = seed, .setup = [&](Executor& e) {
                              if (setup) setup(e);
                              observer.chain_onto(e);
                            }});
    _exit(0);  // the re-run did not crash: no trace
  }
  const int status = wait_for_child(pid);
  if (!WIFSIGNALED(status) || !std::filesystem::exists(path)) {
    std::filesystem::remove(path, ec);
    return false;
  }
  return true;
}

std::string shrink_in_child(const std::string& trace, const std::string& out,
                            const ShrinkOptions& options) {
  std::error_code ec;
  std::filesystem::remove(out, ec);
  const pid_t pid = fork_flushed();
  if (pid < 0) return "not shrunk: cannot start the shrink process";
  if (pid == 0) {
    const AnyTrace t = read_trace(trace);
    const ShrinkResult s = shrink_trace(t.ops, options);
    if (s.reproduced) write_op_trace(out, s.trace);
    std::fflush(nullptr);
    _exit(s.reproduced ? 0 : 3);
  }
  const int status = wait_for_child(pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::filesystem::exists(out)) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    return "not shrunk: the trace did not reproduce its failure";
  }
  return "not shrunk: the shrink process " + crash_violation(status, 0).detail;
}

}  // namespace kvsim::sim
