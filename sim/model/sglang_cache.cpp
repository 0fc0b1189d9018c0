#include "sim/model/sglang_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/config/scenario.h"
#include "sim/model/driver_process.h"
#include "sim/model/storage_faults.h"

#ifndef KVSIM_PYTHON_PACKAGE_DIR
#define KVSIM_PYTHON_PACKAGE_DIR ""
#endif
#ifndef KVSIM_SOURCE_TREE
#define KVSIM_SOURCE_TREE ""
#endif

namespace kvsim::sim {

namespace {

constexpr int kProtocolVersion = 1;

class SglangCache final : public CacheUnderTest {
 public:
  SglangCache(CacheContext ctx, Target& target) : ctx_(std::move(ctx)) {
    driver_ = start_driver(python_of(target), target.sglang_src, stderr_file_);
    const nlohmann::json reply = call({{"call", "hello"},
                                       {"protocol", kProtocolVersion},
                                       {"scenario", to_json(ctx_.scenario)},
                                       {"seed", ctx_.seed}});
    // A hello that found a violation (SGLang raised while building its cache) has reported it
    // through call(); the run then ends before its first op.
    const nlohmann::json sglang = reply.value("sglang", nlohmann::json::object());
    // The commit is a string, or null where the driver could not tell (a tree without git); a
    // reply from another driver version is an error that names the field, not an abort.
    const auto commit = sglang.find("commit");
    if (commit != sglang.end() && !commit->is_null() && !commit->is_string())
      throw DriverError("the SGLang driver's hello: sglang.commit is not a string: " +
                        commit->dump());
    target.sglang_commit =
        commit != sglang.end() && commit->is_string() ? commit->get<std::string>() : "";
    const nlohmann::json streams = reply.value("streams", nlohmann::json::object());
    streams_ = {streams.value("compute", 0u), streams.value("write", 1u),
                streams.value("load", 2u)};
    stream_count_ = reply.value("stream_count", size_t{3});
    storage_ = reply.value("storage", false);
  }

  ~SglangCache() override {
    if (driver_ && driver_->alive()) {
      try {
        driver_->send({{"call", "bye"}});
      } catch (const DriverError&) {  // it is gone already
      }
    }
  }

  static nlohmann::json capabilities(const Target& target) {
    return greeting(target).value("capabilities", nlohmann::json::object());
  }

  std::vector<uint32_t> progress_streams() const override { return streams_; }
  size_t stream_count() const override { return stream_count_; }
  bool storage_enabled() const override { return storage_; }
  bool storage_reads_pending() const override { return storage_reads_; }
  int64_t admission_budget() const override { return budget_; }
  bool loads_queued() const override { return loads_queued_; }

  bool arrive(SimRequest& r, uint64_t now) override {
    const nlohmann::json reply = call(
        {{"call", "arrive"}, {"rid", r.rid}, {"ns", r.ns}, {"tokens", r.tokens}, {"now", now}});
    return reply.value("prefetching", false);
  }

  std::optional<int64_t> prefetch_done(SimRequest& r, uint64_t now) override {
    const nlohmann::json reply = call({{"call", "prefetch_check"}, {"rid", r.rid}, {"now", now}});
    if (!reply.value("done", false)) return std::nullopt;
    return reply.value("loaded", int64_t{0});
  }

  std::optional<AdmitDecision> admit(SimRequest& r, bool load_back, bool defer_load,
                                     std::optional<int64_t> quota) override {
    const bool pd = ctx_.scenario.scheduler.mode == SchedulerMode::kPd;
    const nlohmann::json reply = call({{"call", "admit"},
                                       {"rid", r.rid},
                                       {"ns", r.ns},
                                       {"tokens", r.tokens},
                                       {"load_back", load_back},
                                       {"defer_load", defer_load},
                                       {"quota", quota.value_or(-1)},
                                       {"prefix_cache", !pd}});
    if (!reply.value("admitted", false)) return std::nullopt;
    return AdmitDecision{.device_hit_tokens = reply.value("device_hit", int64_t{0}),
                         .host_hit_tokens = reply.value("host_hit", int64_t{0}),
                         .owned_from = reply.value("owned_from", size_t{0})};
  }

  void start_loads() override { call({{"call", "start_loads"}}); }

  bool compute(SimRequest& r, size_t target, bool oom) override {
    const nlohmann::json reply = call(
        {{"call", "compute"}, {"rid", r.rid}, {"n", target}, {"tokens", r.tokens}, {"oom", oom}});
    return reply.value("computed", false);
  }

  void finish(SimRequest& r) override {
    call({{"call", "finish"}, {"rid", r.rid}, {"computed", r.computed}});
  }
  void retract(SimRequest& r) override {
    call({{"call", "retract"}, {"rid", r.rid}, {"computed", r.computed}});
  }
  void abort(SimRequest& r) override { call({{"call", "abort"}, {"rid", r.rid}}); }
  void offload(SimRequest& r) override { call({{"call", "offload"}, {"rid", r.rid}}); }
  bool resume(SimRequest& r) override {
    return call({{"call", "resume"}, {"rid", r.rid}}).value("resumed", false);
  }
  void verify_resumed(SimRequest& r) override {
    if (ctx_.scenario.check.content) read_prefix(r);
  }

  void poll() override { call({{"call", "poll"}}); }
  void flush() override { call({{"call", "flush"}}); }
  int64_t step(uint32_t stream, int64_t n) override {
    return call({{"call", "step"}, {"stream", stream}, {"n", n}}).value("ran", int64_t{0});
  }
  OpOutcome storage(uint32_t worker, int64_t fault) override {
    if (worker > 2) return OpOutcome{.why = "no storage worker " + std::to_string(worker)};
    nlohmann::json req = {{"call", "storage"}, {"worker", worker}};
    const int64_t code = fault & 0xff;
    if (code > 0 && code < static_cast<int64_t>(kStorageFaults)) {
      req["fault"] = to_string(static_cast<StorageFault>(code));
      req["fault_skip"] = (fault >> kStorageFaultSkipShift) & 0xff;
    }
    return {true, call(req).value("did", false)};
  }
  OpOutcome inject(const Op& op) override {
    if (op.target > 2) return {};
    call({{"call", "inject"}, {"target", op.target}, {"n", op.n}});
    return {true, true};
  }
  // The driver gives injected pages back itself at the end of the call after the inject.
  void release_injected() override {}

  bool read_prefix(SimRequest& r) override {
    const nlohmann::json reply = call({{"call", "read"}, {"rid", r.rid}, {"n", r.computed}});
    ++ctx_.stats.content_checks;
    return !reply.contains("violation");
  }
  // The driver checks SGLang's state after every call it answers (its full walks at the
  // scenario's spacing, counted in state.full_checks); its findings arrive with the reply.
  void check_after_op(bool /*may_change_cache*/) override {}
  void check_quiescent() override { call({{"call", "quiescent"}}); }
  StorageRunStats storage_stats() const override { return {}; }
  std::map<std::string, int64_t> take_decisions() override { return std::exchange(decisions_, {}); }

 private:
  // What the fork server (or, with KVSIM_SGLANG_FORK=0, a server started for the question)
  // greeted with: {"commit", "capabilities"}; memoised per interpreter and source.
  static nlohmann::json greeting(const Target& target) {
    static std::mutex mu;
    static std::map<std::string, nlohmann::json> memo;
    const std::string python = python_of(target);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (const auto it = memo.find(python + "\n" + target.sglang_src); it != memo.end()) {
        return it->second;
      }
    }
    nlohmann::json g;
    const char* fork_env = std::getenv("KVSIM_SGLANG_FORK");
    if (auto z = ask_zygote(python, target.sglang_src, {{"greet", true}})) {
      g = z->value("sglang", nlohmann::json::object());
    } else if (fork_env != nullptr && std::string(fork_env) == "0") {
      DriverProcess server({python, "-m", "kvsim.sglang_target.driver", "--sglang-src",
                            target.sglang_src, "--serve-forks"},
                           python_path(), env_defaults());
      g = server_greeting(server, target.sglang_src);
    } else {
      g = server_for(python, target.sglang_src).second;
    }
    std::lock_guard<std::mutex> lock(mu);
    memo[python + "\n" + target.sglang_src] = g;
    return g;
  }

  static std::string python_of(const Target& target) {
    if (!target.python.empty()) return target.python;
    const char* env = std::getenv("KVSIM_PYTHON");
    return env != nullptr && *env != '\0' ? env : "/usr/bin/python3";
  }

  static nlohmann::json server_greeting(DriverProcess& server, const std::string& src) {
    const nlohmann::json hello = server.read_reply("the fork server's start");
    if (!hello.value("ok", false)) {
      const std::string error = hello.value("error", std::string("(no error given)"));
      throw DriverError("the SGLang driver could not load " + src + ": " + error);
    }
    return hello.value("sglang", nlohmann::json::object());
  }

  // The fork server for (python, src), started when this process has none (a hunt worker
  // forked from a process that had one starts its own: the pipes are the parent's), and its
  // greeting.
  static std::pair<DriverProcess*, nlohmann::json> server_for(const std::string& python,
                                                              const std::string& src) {
    static std::mutex mu;
    struct Server {
      pid_t owner = -1;
      std::unique_ptr<DriverProcess> process;
      nlohmann::json greeting;
    };
    static std::map<std::string, Server> servers;
    std::lock_guard<std::mutex> lock(mu);
    Server& s = servers[python + "\n" + src];
    if (!s.process || s.owner != ::getpid() || !s.process->alive()) {
      if (s.process && s.owner != ::getpid()) static_cast<void>(s.process.release());
      s.process = std::make_unique<DriverProcess>(
          std::vector<std::string>{python, "-m", "kvsim.sglang_target.driver", "--sglang-src", src,
                                   "--serve-forks"},
          python_path(), env_defaults());
      s.owner = ::getpid();
      try {
        s.greeting = server_greeting(*s.process, src);
      } catch (const DriverError&) {
        s.process.reset();
        throw;
      }
    }
    return {s.process.get(), s.greeting};
  }

  // PYTHONPATH for the driver: $KVSIM_PYTHONPATH, else the build tree's package, then what the
  // environment already has.
  static std::vector<std::string> python_path() {
    std::vector<std::string> paths;
    if (const char* p = std::getenv("KVSIM_PYTHONPATH"); p != nullptr && *p != '\0') {
      paths.emplace_back(p);
    } else if (*KVSIM_PYTHON_PACKAGE_DIR != '\0') {
      paths.emplace_back(KVSIM_PYTHON_PACKAGE_DIR);
    }
    return paths;
  }

  // The driver finds the SGLang bundle (bundle:<tag> sources) beside this source tree; Python's
  // string hashing is fixed so that nothing in a run depends on the process it ran in.
  static std::vector<std::string> env_defaults() {
    std::vector<std::string> env{"PYTHONHASHSEED=0"};
    if (*KVSIM_SOURCE_TREE != '\0')
      env.push_back(std::string("KVSIM_SOURCE_DIR=") + KVSIM_SOURCE_TREE);
    return env;
  }

  // KVSIM_SGLANG_ZYGOTE names the socket of a zygote (python/kvsim/sglang_target/zygote.py):
  // one warm process, shared by many kvsim processes, that forks their drivers from a fork
  // server per source, so that a process replaying one trace does not import torch and load
  // SGLang for it. `request` gets what the zygote needs to fork the driver this process would
  // start (interpreter, source, folder, environment). Its reply, or nullopt when there is no
  // zygote or it refused (another interpreter, PYTHONHASHSEED or PYTHONPATH; gone; broken):
  // then the driver is started as without one.
  static std::optional<nlohmann::json> ask_zygote(const std::string& python, const std::string& src,
                                                  nlohmann::json request) {
    const char* socket = std::getenv("KVSIM_SGLANG_ZYGOTE");
    if (socket == nullptr || *socket == '\0') return std::nullopt;
    nlohmann::json env = nlohmann::json::object();
    for (const std::string& e : driver_environment(python_path(), env_defaults())) {
      const size_t eq = e.find('=');
      if (eq != std::string::npos) env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    std::vector<char> cwd(4096);
    if (::getcwd(cwd.data(), cwd.size()) == nullptr) return std::nullopt;
    request["python"] = python;
    request["src"] = src;
    request["cwd"] = std::string(cwd.data());
    request["env"] = std::move(env);
    // Loading a source the zygote has not loaded yet takes seconds (an extraction, more).
    std::optional<nlohmann::json> reply = unix_socket_call(socket, request, 300);
    if (!reply || !reply->value("ok", false)) return std::nullopt;
    return reply;
  }

  // A file removed with its owner (a zygote's driver's standard error).
  struct TempFile {
    std::string path;
    TempFile() = default;
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  };

  // A driver forked by `ask(in, out)` (a fork server or a zygote), talking over two FIFOs made
  // here; nullptr when `ask` answers nullopt (a zygote that refused).
  template <typename Ask>
  static std::unique_ptr<DriverProcess> forked_driver(const Ask& ask,
                                                      const std::string& stderr_path) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir_pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kvsim-driver-XXXXXX";
    std::vector<char> dir_buf(dir_pattern.begin(), dir_pattern.end());
    dir_buf.push_back('\0');
    if (::mkdtemp(dir_buf.data()) == nullptr) {
      throw DriverError(dir_pattern +
                        ": cannot make a folder for the driver's pipes: " + std::strerror(errno));
    }
    const std::string dir(dir_buf.data());
    const std::string in = dir + "/in", out = dir + "/out";
    struct Cleanup {
      std::string dir, in, out;
      ~Cleanup() {
        ::unlink(in.c_str());
        ::unlink(out.c_str());
        ::rmdir(dir.c_str());
      }
    } cleanup{dir, in, out};
    if (::mkfifo(in.c_str(), 0600) != 0 || ::mkfifo(out.c_str(), 0600) != 0) {
      throw DriverError(dir + ": mkfifo: " + std::strerror(errno));
    }
    if (!ask(in, out)) return nullptr;
    // The child opens its input first, then its output; the same order here.
    const int to_child = ::open(in.c_str(), O_WRONLY | O_CLOEXEC);
    const int from_child = to_child >= 0 ? ::open(out.c_str(), O_RDONLY | O_CLOEXEC) : -1;
    if (from_child < 0) {
      if (to_child >= 0) ::close(to_child);
      throw DriverError(dir + ": cannot open the driver's pipes: " + std::strerror(errno));
    }
    return std::make_unique<DriverProcess>(to_child, from_child, stderr_path);
  }

  // One driver per run. Starting one costs 1-2 s (torch and SGLang's modules); a fork server
  // (`driver --serve-forks`, one per kvsim process and source) pays that once and forks a
  // fresh driver per run, talking to it over two FIFOs. KVSIM_SGLANG_FORK=0 spawns each driver.
  // A zygote (ask_zygote) comes first where one is named.
  static std::unique_ptr<DriverProcess> start_driver(const std::string& python,
                                                     const std::string& src,
                                                     TempFile& stderr_file) {
    if (const char* z = std::getenv("KVSIM_SGLANG_ZYGOTE"); z != nullptr && *z != '\0') {
      stderr_file.path = temp_stderr_path();
      auto forked = forked_driver(
          [&](const std::string& in, const std::string& out) {
            return ask_zygote(python, src, {{"in", in}, {"out", out}, {"stderr", stderr_file.path}})
                .has_value();
          },
          stderr_file.path);
      if (forked) return forked;
    }
    const std::vector<std::string> argv{python, "-m", "kvsim.sglang_target.driver", "--sglang-src",
                                        src};
    const char* fork_env = std::getenv("KVSIM_SGLANG_FORK");
    if (fork_env != nullptr && std::string(fork_env) == "0") {
      return std::make_unique<DriverProcess>(argv, python_path(), env_defaults());
    }
    DriverProcess* server = server_for(python, src).first;
    return forked_driver(
        [&](const std::string& in, const std::string& out) {
          const nlohmann::json forked = server->call({{"fork", {{"in", in}, {"out", out}}}});
          if (!forked.value("ok", false)) {
            throw DriverError("the SGLang fork server refused: " +
                              forked.value("error", std::string("(no error given)")));
          }
          return true;
        },
        server->stderr_path());
  }

  nlohmann::json call(const nlohmann::json& request) {
    // After a violation the driver accepts only 'bye': the rest of the op that found it (an
    // admit's model read, a resumed request's read) is not sent, and the run ends after the op.
    if (violated_) return nlohmann::json::object();
    nlohmann::json reply = driver_->call(request);
    if (!reply.value("ok", false)) {
      const std::string error = reply.value("error", std::string("(no error given)"));
      throw DriverError("the SGLang driver refused \"" + request.value("call", std::string()) +
                        "\": " + error);
    }
    if (const auto it = reply.find("state"); it != reply.end()) {
      ctx_.stats.full_checks = it->value("full_checks", ctx_.stats.full_checks);
      budget_ = it->value("budget", budget_);
      storage_reads_ = it->value("storage_reads", false);
      loads_queued_ = it->value("loads_queued", false);
    }
    // The reply's decisions, summed over the calls until the differential takes them.
    if (const auto it = reply.find("decisions"); it != reply.end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        if (value.is_number_integer()) decisions_[key] += value.get<int64_t>();
      }
    }
    if (const auto it = reply.find("violation"); it != reply.end() && it->is_object()) {
      violated_ = true;
      ctx_.fail(it->value("invariant", std::string("sglang.driver")),
                it->value("detail", std::string()));
    }
    return reply;
  }

  CacheContext ctx_;
  TempFile stderr_file_;  // a zygote's driver's standard error (start_driver)
  std::unique_ptr<DriverProcess> driver_;
  std::vector<uint32_t> streams_;
  size_t stream_count_ = 3;
  bool storage_ = false;
  bool storage_reads_ = false;
  bool loads_queued_ = false;
  bool violated_ = false;  // the driver reported a violation (call)
  int64_t budget_ = 0;
  std::map<std::string, int64_t> decisions_;  // take_decisions
};

}  // namespace

std::unique_ptr<CacheUnderTest> make_sglang_cache(CacheContext ctx, Target& target) {
  return std::make_unique<SglangCache>(std::move(ctx), target);
}

nlohmann::json sglang_capabilities(const Target& target) {
  return SglangCache::capabilities(target);
}

}  // namespace kvsim::sim
