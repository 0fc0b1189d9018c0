// PyTree's construction and its recording's life (py_tree.h): the options and the recording
// target (argument or environment), the window or bound, closing and flushing, and what
// follows each recorded call (the bound that ends it, the window's next segment).
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/tree/eviction_policy.h"
#include "python/src/py_tree.h"
#include "python/src/recording_registry.h"

namespace py = pybind11;

namespace kvsim::python {
namespace {

// Each tree's serial (never reused, unlike an address): a Lock names the tree it belongs to.
std::atomic<uint64_t> g_next_tree_serial{1};

// A recording bound from the environment: a whole number (KVSIM_RECORD_MAX_CALLS,
// KVSIM_RECORD_WINDOW) or a number of seconds (KVSIM_RECORD_WINDOW_SECONDS); 0 when unset.
uint64_t env_count(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const uint64_t v = std::strtoull(env, &end, 10);
  if (end == env || *end != '\0' || env[0] == '-') {
    throw py::value_error(std::string(name) + ": not a number: " + env);
  }
  return v;
}
double env_seconds(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0) || v > 1e9) {
    throw py::value_error(std::string(name) + ": not a number of seconds: " + env);
  }
  return v;
}

}  // namespace

uint64_t PyTree::next_serial() {
  return g_next_tree_serial.fetch_add(1);
}

PyTree::PyTree(int32_t page_size, const std::string& policy, py::object record,
               uint64_t record_max_calls, uint64_t record_window, double record_window_seconds) {
  if (page_size <= 0) {
    throw py::value_error("page_size must be positive, got " + std::to_string(page_size));
  }
  RadixTreeOptions options;
  options.page_size = page_size;
  if (!parse_eviction_policy(policy, &options.eviction_policy)) {
    throw py::value_error("eviction_policy: unknown policy '" + policy + "' (lru, lfu)");
  }
  policy_ = policy;
  guarded([&] { tree_ = std::make_unique<RadixTree>(options); });
  std::string target;
  if (!record.is_none()) {
    target = py::str(record);
  } else if (const char* env = std::getenv("KVSIM_RECORD"); env != nullptr && *env != '\0') {
    target = env;
  }
  if (!target.empty()) {
    if (target.size() < 6 || target.compare(target.size() - 6, 6, ".jsonl") != 0) {
      static int seq = 0;  // a directory: one file per tree
      target +=
          "/kvsim-calls-" + std::to_string(::getpid()) + "-" + std::to_string(seq++) + ".jsonl";
    }
    if (record_max_calls == 0) record_max_calls = env_count("KVSIM_RECORD_MAX_CALLS");
    if (record_window == 0) record_window = env_count("KVSIM_RECORD_WINDOW");
    if (!(record_window_seconds >= 0)) {
      throw py::value_error("record_window_seconds must be >= 0, got " +
                            std::to_string(record_window_seconds));
    }
    if (record_window_seconds == 0) {
      record_window_seconds = env_seconds("KVSIM_RECORD_WINDOW_SECONDS");
    }
    std::optional<TreeSnapshot> first_snapshot;
    if (record_window != 0 || record_window_seconds > 0) {
      if (record_max_calls != 0) {
        throw py::value_error(
            "record_max_calls (KVSIM_RECORD_MAX_CALLS) keeps the first calls and record_window "
            "(KVSIM_RECORD_WINDOW, _SECONDS) the last ones: give one of them");
      }
      window_ = std::make_unique<RecordingWindow>(target, record_window, record_window_seconds);
      target = window_->current_path();
      first_snapshot = tree_->snapshot();
    }
    rec_ = std::make_unique<CallRecorder>(target, page_size, options.eviction_policy,
                                          record_max_calls, std::move(first_snapshot));
    install_signal_flush();
    watch_on_signal(rec_.get());
    add_open_recording(this);
  }
}

PyTree::~PyTree() {
  close_recording();
  if (rec_) unwatch_on_signal(rec_.get());
}

void PyTree::close_recording() {
  remove_open_recording(this);
  std::lock_guard<std::mutex> g(mu_);
  if (rec_ && rec_->active()) {
    if (poisoned_) {
      rec_->flush();
    } else {
      rec_->finish(tree_->node_count(), tree_->evictable_size(), tree_->protected_size());
    }
  }
}

void PyTree::flush_recording() {
  std::lock_guard<std::mutex> g(mu_);
  if (rec_) rec_->flush();
}

std::optional<std::string> PyTree::recording_path() {
  std::lock_guard<std::mutex> g(mu_);
  return rec_ ? std::optional<std::string>(rec_->path()) : std::nullopt;
}

std::vector<std::string> PyTree::recording_segments() {
  std::lock_guard<std::mutex> g(mu_);
  if (!rec_) return {};
  if (!window_) return {rec_->path()};
  return window_->live();
}

bool PyTree::recording_now() {
  std::lock_guard<std::mutex> g(mu_);
  return recording();
}

bool PyTree::poisoned() {
  std::lock_guard<std::mutex> g(mu_);
  return poisoned_;
}

std::string PyTree::poison_message() {
  std::lock_guard<std::mutex> g(mu_);
  return poison_message_;
}

void PyTree::after_call() {
  if (rec_->at_bound()) {
    rec_->finish(tree_->node_count(), tree_->evictable_size(), tree_->protected_size(),
                 std::nullopt,
                 /*truncated=*/true);
  } else if (window_ && window_->due(rec_->segment_calls())) {
    if (rec_->next_segment(window_->next_path(), tree_->snapshot(), tree_->node_count(),
                           tree_->evictable_size(), tree_->protected_size())) {
      window_->started_next();
    } else {
      std::fprintf(stderr, "kvsim: recording stopped: cannot open %s\n",
                   window_->next_path().c_str());
    }
  }
}

void PyTree::stop_recording() {
  rec_->finish(tree_->node_count(), tree_->evictable_size(), tree_->protected_size(), std::nullopt,
               /*truncated=*/true);
}

}  // namespace kvsim::python
