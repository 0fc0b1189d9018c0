// PyTree: kvsim.RadixTree, the core's RadixTree behind one mutex, with the caller's slots, a
// poisoned state after a failed core assertion, call statistics and an optional call recorder.
//
// Thread safety (docs/sglang.md, "The Python module"): calls that do real work release the GIL;
// the tree's mutex serialises threads, and everything a call returns (node ids, slot arrays) is
// read while it is held: another thread's evict may free a result's node the moment it is
// released. The core's assertion handler is per thread, so guarded() installs the throwing one
// on whichever thread makes the call.
//
// Implementation: py_tree.cpp (construction, the recording's life), py_tree_calls.cpp (match,
// insert, lock, unlock, evict), py_tree_reads.cpp (sizes, nodes, sanity, stats).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "python/src/errors.h"
#include "python/src/py_lock.h"
#include "python/src/recorder.h"
#include "python/src/recording_window.h"
#include "sim/trace/call_trace.h"

namespace kvsim::python {

// Calls with at least this many tokens (or any evict) run without the GIL.
inline constexpr size_t kReleaseGilTokens = 2048;

struct CallStats {
  int64_t match_calls = 0;
  int64_t match_tokens = 0;  // page-aligned tokens asked for
  int64_t hit_tokens = 0;
  int64_t insert_calls = 0;
  int64_t insert_tokens = 0;  // page-aligned tokens inserted
  int64_t new_tokens = 0;     // of which the tree did not hold
  int64_t evict_calls = 0;
  int64_t evict_requested = 0;
  int64_t evicted_tokens = 0;
  int64_t evicted_nodes = 0;
  int64_t lock_calls = 0;
  int64_t unlock_calls = 0;
};

class PyTree {
 public:
  // record: a directory (one file per tree) or a .jsonl path; None reads KVSIM_RECORD. The
  // bounds, when 0, are read from KVSIM_RECORD_MAX_CALLS, KVSIM_RECORD_WINDOW and
  // KVSIM_RECORD_WINDOW_SECONDS.
  PyTree(int32_t page_size, const std::string& policy, pybind11::object record,
         uint64_t record_max_calls, uint64_t record_window, double record_window_seconds);
  ~PyTree();

  // The recording (py_tree.cpp).
  // Ends the recording with its footer (idempotent).
  void close_recording();
  void flush_recording();
  // Under the tree's mutex: a window's next segment changes it.
  std::optional<std::string> recording_path();
  // The recording's files on disk, oldest first: a window's last two segments, else the one.
  std::vector<std::string> recording_segments();
  // Under the tree's mutex (a call on another thread may end the recording).
  bool recording_now();

  int32_t page_size() const { return tree_->page_size(); }
  const std::string& policy() const { return policy_; }
  bool poisoned();
  std::string poison_message();

  // Calls (py_tree_calls.cpp).
  pybind11::tuple match_prefix(pybind11::handle tokens_obj, Namespace ns);
  pybind11::tuple insert(pybind11::handle tokens_obj, pybind11::handle value_obj, Namespace ns);
  PyLock lock(NodeId node_id);
  // -> the change of evictable_size() (>= 0), SGLang's dec_lock_ref delta.
  int64_t unlock(const PyLock& lock);
  // SGLang's inc_lock_ref / dec_lock_ref, by node: lock_ref keeps the lock on the node's stack
  // and returns its delta (<= 0); unlock_ref releases the one taken last on that node and
  // returns its delta (>= 0). The same calls as lock / unlock (and recorded as them), without a
  // Lock object for the caller to keep. The stacks are touched with the GIL held.
  int64_t lock_ref(NodeId node_id);
  int64_t unlock_ref(NodeId node_id);
  // Frees at least `tokens` device tokens (whole LRU leaves), as SGLang's RadixCache.evict.
  // Returns (freed slots, [(node id, tokens)] in eviction order[, [path tokens] if with_paths]).
  pybind11::tuple evict(int64_t tokens, bool with_paths);

  // Reads, under the tree's mutex (py_tree_reads.cpp).
  int64_t evictable_size();
  int64_t protected_size();
  int64_t total_size();
  size_t node_count();
  NodeId root_id();
  bool contains(NodeId id);
  // Node ids, root first, children in key order (deterministic).
  std::vector<NodeId> node_ids();
  pybind11::dict node_info(NodeId id);
  // Copies: a node's storage may be split or freed by the next call, so no view is handed out.
  pybind11::array_t<int32_t> node_key(NodeId id);
  pybind11::array_t<int64_t> node_value(NodeId id);
  pybind11::array_t<int32_t> path_tokens(NodeId id);
  // [(invariant, detail, node or None, slot or None)]; empty when every invariant holds.
  pybind11::list sanity_check();
  pybind11::dict stats();

 private:
  static uint64_t next_serial();

  size_t aligned(size_t n) const {
    const auto p = static_cast<size_t>(tree_->page_size());
    return n / p * p;
  }

  const TreeNode& node_or_throw(NodeId id) const {
    const TreeNode* n = tree_->find(id);
    if (n == nullptr) throw pybind11::value_error("node " + std::to_string(id) + " does not exist");
    return *n;
  }

  bool recording() const { return rec_ && rec_->active(); }

  // Runs f with assertion capture: a failed KV_ASSERT poisons the tree. The core's handler is
  // per thread, so it is installed here, on whichever thread makes the call.
  template <typename F>
  void guarded(F&& f) {
    if (poisoned_)
      throw Poisoned("kvsim tree is poisoned by an earlier core assertion: " + poison_message_);
    ScopedThrowingAsserts throwing;
    try {
      f();
    } catch (const AssertionFailure& e) {
      poisoned_ = true;
      poison_message_ = e.what();
      if (recording() && on_fail_) {
        rec_->finish_call(*on_fail_, nullptr);
        rec_->violation(e.what(), tree_->node_count(), tree_->evictable_size(),
                        tree_->protected_size());
      }
      throw CoreAssertion(std::string("core assertion failed: ") + e.what());
    }
  }

  // A mutating call: serialised, GIL released when it is worth it.
  template <typename F>
  void run(size_t work, F&& f) {
    if (work >= kReleaseGilTokens) {
      pybind11::gil_scoped_release nogil;
      std::lock_guard<std::mutex> g(mu_);
      guarded(f);
    } else {
      std::lock_guard<std::mutex> g(mu_);
      guarded(f);
    }
  }

  template <typename F>
  auto read(F&& f) -> decltype(f()) {
    std::lock_guard<std::mutex> g(mu_);
    std::optional<decltype(f())> out;
    guarded([&] { out.emplace(f()); });
    return std::move(*out);
  }

  // After each recorded call: the first-calls bound, or the window's next segment.
  void after_call();
  void stop_recording();

  std::unique_ptr<RadixTree> tree_;
  std::unique_ptr<CallRecorder> rec_;
  std::unique_ptr<RecordingWindow> window_;  // set: a rolling window of the last calls
  // lock_ref's locks by node, last taken last (looked up, never iterated).
  std::unordered_map<NodeId, std::vector<PyLock>> ref_locks_;
  std::optional<sim::CallKind> on_fail_;  // the call a failing assertion belongs to
  std::string policy_;
  std::mutex mu_;
  const uint64_t serial_ = next_serial();  // never reused, unlike an address
  bool poisoned_ = false;
  std::string poison_message_;
  CallStats stats_;
};

}  // namespace kvsim::python
