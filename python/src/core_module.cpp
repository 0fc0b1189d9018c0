// kvsim._core: the Python binding of kvsim's radix tree (pybind11).
//
// What it binds, as the core has it: RadixTree (match_prefix / insert / lock / unlock, the
// device-victim order, sizes, sanity_check) with the slots owned by the caller, the way SGLang's
// RadixCache holds indices into a token_to_kv_pool allocator it does not own. evict() is the
// loop HiCache runs for a device-only tree (next_device_victim + remove_device_leaf), returning
// the freed slots for the caller's allocator.
//
// Rules of the binding (docs/sglang.md, "The Python module"):
//  - index arrays cross without copies where the core allows it: a match or an evict hands the
//    core's freshly built index vector to numpy (the array owns it through a capsule); token
//    buffers are read in place, int32 and int64 alike (the core compares wide ids without a
//    narrowed copy); an insert's ids are range-checked against kvsim's 32-bit Token;
//  - calls that do real work release the GIL; one mutex per tree serialises threads, and
//    everything a call returns (node ids, slot arrays) is read while that mutex is held: another
//    thread's evict may free a result's node the moment the mutex is released;
//  - the throwing assertion handler is per thread in the core: every call installs it on the
//    thread that makes the call, so a core assertion raises on any thread, not only the
//    importing one;
//  - a bad argument raises ValueError / TypeError before the core sees it; a violated core
//    assertion raises kvsim.CoreAssertionError with the core's message, and that tree is
//    poisoned: every later call raises kvsim.PoisonedError (its state is not trusted any more);
//  - a call recorder (python/src/recorder.*) sees every call when recording is on.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/common/sanity.h"
#include "core/common/simd_clones.h"
#include "core/tree/eviction_policy.h"
#include "core/tree/radix_tree.h"
#include "python/src/recorder.h"
#include "python/src/recording_window.h"
#include "sim/trace/call_trace.h"

namespace py = pybind11;

namespace kvsim::python {
namespace {

// Raised (as kvsim.CoreAssertionError) when a core KV_ASSERT fails inside a call.
struct CoreAssertion : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Raised (as kvsim.PoisonedError) by every call on a tree whose earlier call failed an assertion.
struct Poisoned : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A call the tree cannot make sense of (KvsimError), e.g. a dec_lock_ref with no lock to release.
struct CallError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls with at least this many tokens (or any evict) run without the GIL.
constexpr size_t kReleaseGilTokens = 2048;

// An int64 array that owns its storage through a capsule: no copy of the core's vector.
py::array_t<int64_t> to_numpy(std::vector<int64_t>&& v) {
  auto* owner = new std::vector<int64_t>(std::move(v));
  py::capsule free_when_done(owner, [](void* p) { delete static_cast<std::vector<int64_t>*>(p); });
  return py::array_t<int64_t>(static_cast<py::ssize_t>(owner->size()), owner->data(),
                              free_when_done);
}

// n slots in new, uninitialised storage (no zero fill: the expansion of page-granular indices
// writes every slot once), filled inside a call's run() (without the GIL for large calls) and
// then handed to numpy, which owns it.
struct SlotBuffer {
  std::unique_ptr<int64_t[]> data;
  size_t size = 0;

  template <typename Fill>
  static SlotBuffer filled(size_t n, Fill&& fill) {
    SlotBuffer b{std::make_unique_for_overwrite<int64_t[]>(n), n};
    fill(b.data.get());
    return b;
  }
};

py::array_t<int64_t> to_numpy(SlotBuffer&& b) {
  int64_t* data = b.data.release();
  py::capsule owner(data, [](void* p) { delete[] static_cast<int64_t*>(p); });
  return py::array_t<int64_t>(static_cast<py::ssize_t>(b.size), data, owner);
}

// torch's Tensor type and the dtypes read in place, learnt from the first object whose type
// comes from an already imported torch (kvsim never imports torch itself). References held for
// the life of the process.
struct TorchTypes {
  PyObject* tensor = nullptr;
  PyObject* int64 = nullptr;
  PyObject* int32 = nullptr;
  PyObject* strided = nullptr;
};

const TorchTypes* torch_types(py::handle obj) {
  static TorchTypes types;
  if (types.tensor != nullptr) return &types;
  // Only an object of a class defined by torch can make us look (no import on other inputs).
  py::object mod = py::getattr(py::type::handle_of(obj), "__module__", py::none());
  if (!py::isinstance<py::str>(mod) || mod.cast<std::string>().rfind("torch", 0) != 0)
    return nullptr;
  PyObject* torch = PyImport_GetModule(py::str("torch").ptr());  // new reference, or null
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  py::object t = py::reinterpret_steal<py::object>(torch);
  types.int64 = py::object(t.attr("int64")).release().ptr();
  types.int32 = py::object(t.attr("int32")).release().ptr();
  types.strided = py::object(t.attr("strided")).release().ptr();
  types.tensor = py::object(t.attr("Tensor")).release().ptr();
  return &types;
}

// A read view of a 1-D integer buffer (numpy array, array.array, memoryview, bytes of ints) or
// a torch CPU tensor (through .numpy(), a view) or a list/tuple of ints (converted).
class IntBuffer {
 public:
  IntBuffer(py::handle obj, const char* what) {
    // torch tensors have no buffer protocol: only other objects are looked at as tensors, so a
    // numpy array or an array.array never pays for the check.
    if (!PyObject_CheckBuffer(obj.ptr()) && read_cpu_tensor(obj)) return;
    if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
      py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
      owned_.reserve(seq.size());
      for (py::handle item : seq) {
        if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item)) {
          throw py::type_error(std::string(what) + ": expected integers, got " +
                               std::string(py::str(item.get_type().attr("__name__"))));
        }
        owned_.push_back(item.cast<int64_t>());
      }
      data64_ = owned_.data();
      size_ = owned_.size();
      return;
    }
    py::object src = py::reinterpret_borrow<py::object>(obj);
    if (!PyObject_CheckBuffer(src.ptr())) {
      if (py::hasattr(src, "dtype") && py::hasattr(src, "numpy")) {
        // A torch tensor: a CPU one gives a numpy view (no copy); another device's is copied
        // to the host first (.cpu()), as a caller would have to.
        try {
          src = src.attr("numpy")();
        } catch (py::error_already_set&) {
          if (!py::hasattr(src, "cpu")) throw;
          src = src.attr("cpu")().attr("numpy")();
        }
      } else {
        throw py::type_error(std::string(what) +
                             ": expected a 1-D integer buffer (numpy, array.array, torch CPU "
                             "tensor) or a list of ints, got " +
                             std::string(py::str(obj.get_type().attr("__name__"))));
      }
    }
    keep_ = src;
    info_ = py::buffer(src).request();
    if (info_.ndim != 1) {
      throw py::value_error(std::string(what) + ": expected a 1-D buffer, got " +
                            std::to_string(info_.ndim) + " dimensions");
    }
    size_ = static_cast<size_t>(info_.shape[0]);
    if (size_ > 1 && info_.strides[0] != info_.itemsize) {
      throw py::value_error(std::string(what) + ": expected a contiguous buffer");
    }
    const std::string& f = info_.format;
    const char code = f.empty() ? '?' : f.back();  // skip byte-order prefixes like '<' / '='
    const bool is_signed = code == 'b' || code == 'h' || code == 'i' || code == 'l' || code == 'q';
    const bool is_unsigned =
        code == 'B' || code == 'H' || code == 'I' || code == 'L' || code == 'Q';
    if (!(is_signed || is_unsigned)) {
      throw py::type_error(std::string(what) + ": expected an integer dtype, got format '" + f +
                           "'");
    }
    if (is_signed && info_.itemsize == 4) {
      data32_ = static_cast<const int32_t*>(info_.ptr);
    } else if (is_signed && info_.itemsize == 8) {
      data64_ = static_cast<const int64_t*>(info_.ptr);
    } else {
      // Narrow or unsigned: widen once (rare: SGLang passes int64).
      owned_.resize(size_);
      for (size_t i = 0; i < size_; ++i) {
        const char* p =
            static_cast<const char*>(info_.ptr) + i * static_cast<size_t>(info_.itemsize);
        owned_[i] = read_one(p, code, info_.itemsize, what, i);
      }
      data64_ = owned_.data();
    }
  }

  size_t size() const { return size_; }
  const int32_t* data32() const { return data32_; }
  const int64_t* data64() const { return data64_; }
  int64_t at(size_t i) const { return data32_ != nullptr ? data32_[i] : data64_[i]; }

 private:
  static int64_t read_one(const char* p, char code, py::ssize_t size, const char* what, size_t i) {
    switch (size) {
      case 1:
        return code == 'B' ? static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(p))
                           : static_cast<int64_t>(*reinterpret_cast<const int8_t*>(p));
      case 2:
        return code == 'H' ? static_cast<int64_t>(*reinterpret_cast<const uint16_t*>(p))
                           : static_cast<int64_t>(*reinterpret_cast<const int16_t*>(p));
      case 4:
        return static_cast<int64_t>(*reinterpret_cast<const uint32_t*>(p));
      case 8: {
        const uint64_t u = *reinterpret_cast<const uint64_t*>(p);
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          throw py::value_error(std::string(what) + "[" + std::to_string(i) +
                                "] = " + std::to_string(u) + " does not fit in int64");
        }
        return static_cast<int64_t>(u);
      }
      default:
        throw py::type_error(std::string(what) + ": unsupported item size " + std::to_string(size));
    }
  }

  // A strided, 1-D, contiguous int64 or int32 torch tensor on the CPU, read in place from its
  // data pointer: a few attribute reads instead of building a numpy view per call. Anything else
  // (another device or dtype, a view with steps) goes the general way and gets its message.
  bool read_cpu_tensor(py::handle obj) {
    const TorchTypes* tt = torch_types(obj);
    if (tt == nullptr ||
        !PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(tt->tensor)))
      return false;
    // Interned names: an attribute read by a C string would build a new str every time.
    static PyObject* const kIsCpu = PyUnicode_InternFromString("is_cpu");
    static PyObject* const kLayout = PyUnicode_InternFromString("layout");
    static PyObject* const kDtype = PyUnicode_InternFromString("dtype");
    static PyObject* const kDim = PyUnicode_InternFromString("dim");
    static PyObject* const kNumel = PyUnicode_InternFromString("numel");
    static PyObject* const kIsContiguous = PyUnicode_InternFromString("is_contiguous");
    static PyObject* const kDataPtr = PyUnicode_InternFromString("data_ptr");
    const auto get = [&](PyObject* name) {
      PyObject* v = PyObject_GetAttr(obj.ptr(), name);
      if (v == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(v);
    };
    const auto call = [&](PyObject* name) {
      PyObject* v = PyObject_CallMethodObjArgs(obj.ptr(), name, nullptr);
      if (v == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(v);
    };
    if (get(kIsCpu).ptr() != Py_True) return false;
    if (get(kLayout).ptr() != tt->strided) return false;
    const py::object dtype = get(kDtype);
    const bool wide = dtype.ptr() == tt->int64;
    if (!wide && dtype.ptr() != tt->int32) return false;
    if (call(kDim).cast<int64_t>() != 1) return false;
    const auto n = call(kNumel).cast<size_t>();
    if (n > 1 && call(kIsContiguous).ptr() != Py_True) return false;
    const auto ptr = call(kDataPtr).cast<uintptr_t>();
    keep_ = py::reinterpret_borrow<py::object>(obj);  // the tensor outlives the call
    size_ = n;
    if (wide) {
      data64_ = reinterpret_cast<const int64_t*>(ptr);
    } else {
      data32_ = reinterpret_cast<const int32_t*>(ptr);
    }
    return true;
  }

  py::object keep_;
  py::buffer_info info_;
  std::vector<int64_t> owned_;
  const int32_t* data32_ = nullptr;
  const int64_t* data64_ = nullptr;
  size_t size_ = 0;
};

// The OR of n slot indices (negative: some index is).
KVSIM_SIMD_CLONES int64_t or_all(const int64_t* v, size_t n) {
  int64_t all = 0;
  for (size_t i = 0; i < n; ++i)
    all |= v[i];
  return all;
}

// One vectorised pass over a value's slots: their OR (negative: some slot is) and whether every
// page of `page` slots holds consecutive slots (v[k*page + j] == v[k*page] + j).
struct SlotScan {
  int64_t all_or = 0;
  bool page_runs = false;
};
KVSIM_SIMD_CLONES SlotScan scan_slots(const int64_t* v, size_t n, size_t page) {
  SlotScan scan;
  if (page <= 1 || n % page != 0) {
    scan.all_or = or_all(v, n);
    return scan;
  }
  uint64_t diff = 0;
  int64_t all = 0;
  for (size_t k = 0; k < n; k += page) {
    const int64_t first = v[k];
    const int64_t* p = v + k;
    for (size_t j = 0; j < page; ++j) {
      all |= p[j];
      diff |= static_cast<uint64_t>((p[j] - static_cast<int64_t>(j)) ^ first);
    }
  }
  scan.all_or = all;
  scan.page_runs = diff == 0;
  return scan;
}

// The tree's form of a caller's slots: one entry per page when each page's slots are
// consecutive (what a paged allocator hands out: the tree then stores, slices and returns one
// index per page), else one per token. Same contents either way (IndexVector invariant 3).
IndexVector device_value(std::span<const SlotIndex> slots, int32_t page_size, bool page_runs) {
  if (page_runs && page_size > 1) {
    const auto page = static_cast<size_t>(page_size);
    std::vector<SlotIndex> firsts(slots.size() / page);
    for (size_t k = 0; k < firsts.size(); ++k)
      firsts[k] = slots[k * page];
    return IndexVector::pages(Tier::kDevice, page_size, std::move(firsts));
  }
  return IndexVector(Tier::kDevice, std::vector<SlotIndex>(slots.begin(), slots.end()));
}

// A caller's token ids, read in place: int32 ids as kvsim's Token, int64 ("wide") ids as they
// are (the core compares them without a narrowed copy; only the tokens of new nodes are
// narrowed, by the core, which refuses an id out of range with TokenOutOfRange: ValueError).
class Tokens {
 public:
  Tokens(py::handle obj, const char* what) : buf_(obj, what) {}
  size_t size() const { return buf_.size(); }
  bool wide() const { return buf_.data32() == nullptr; }
  std::span<const Token> narrow_span() const { return {buf_.data32(), buf_.size()}; }
  std::span<const int64_t> wide_span() const { return {buf_.data64(), buf_.size()}; }
  // f(span of Token or of int64_t), whichever the caller passed.
  template <typename F>
  decltype(auto) visit(F&& f) const {
    return wide() ? f(wide_span()) : f(narrow_span());
  }

 private:
  IntBuffer buf_;
};

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

// A lock held through the binding: the core's LockRecord, opaque to Python.
struct PyLock {
  LockRecord record;
  uint64_t tree = 0;  // the serial of the tree that took it: another tree refuses it
  NodeId node = 0;
  int64_t call = -1;  // index of the lock call in the recording, -1 when not recorded
  int64_t delta = 0;  // change of evictable_size() the lock made (<= 0), SGLang's delta
};

// The recorders a SIGTERM / SIGABRT handler flushes: a fixed table of atomic pointers, so the
// handler takes no lock and allocates nothing (recorder.h, signal_flush()). A process with more
// than kSignalSlots recording trees at once flushes only the first ones on a signal.
constexpr size_t kSignalSlots = 256;
std::atomic<CallRecorder*> g_signal_recorders[kSignalSlots];
struct sigaction g_previous_term;
struct sigaction g_previous_abrt;
std::once_flag g_signals_once;

extern "C" void kvsim_flush_on_signal(int sig, siginfo_t* info, void* context) {
  for (auto& slot : g_signal_recorders) {
    if (CallRecorder* r = slot.load()) r->signal_flush(sig);
  }
  // Then what would have happened without kvsim: the previous handler, or the default action.
  const struct sigaction& prev = sig == SIGTERM ? g_previous_term : g_previous_abrt;
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler == SIG_DFL) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // blocked until this handler returns, then the default action
    return;
  }
  prev.sa_handler(sig);
}

// Installed once, when the first recording starts (KVSIM_RECORD_SIGNALS=0: not at all).
void install_signal_flush() {
  std::call_once(g_signals_once, [] {
    if (const char* env = std::getenv("KVSIM_RECORD_SIGNALS"); env != nullptr && env[0] == '0')
      return;
    struct sigaction sa {};
    sa.sa_sigaction = &kvsim_flush_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_previous_term);
    sigaction(SIGABRT, &sa, &g_previous_abrt);
  });
}
void watch_on_signal(CallRecorder* r) {
  for (auto& slot : g_signal_recorders) {
    CallRecorder* empty = nullptr;
    if (slot.compare_exchange_strong(empty, r)) return;
  }
}
void unwatch_on_signal(CallRecorder* r) {
  for (auto& slot : g_signal_recorders) {
    CallRecorder* mine = r;
    if (slot.compare_exchange_strong(mine, nullptr)) return;
  }
}

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

class PyTree;
// Each tree's serial (never reused, unlike an address): a Lock names the tree it belongs to.
std::atomic<uint64_t> g_next_tree_serial{1};
// Trees with an open recording, closed at interpreter exit (kvsim/__init__.py's atexit hook).
std::mutex g_recording_mu;
std::set<PyTree*> g_recording;

class PyTree {
 public:
  PyTree(int32_t page_size, const std::string& policy, py::object record, uint64_t record_max_calls,
         uint64_t record_window, double record_window_seconds) {
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
      std::lock_guard<std::mutex> g(g_recording_mu);
      g_recording.insert(this);
    }
  }
  ~PyTree() {
    close_recording();
    if (rec_) unwatch_on_signal(rec_.get());
  }

  // Ends the recording with its footer (idempotent).
  void close_recording() {
    {
      std::lock_guard<std::mutex> g(g_recording_mu);
      g_recording.erase(this);
    }
    std::lock_guard<std::mutex> g(mu_);
    if (rec_ && rec_->active()) {
      if (poisoned_) {
        rec_->flush();
      } else {
        rec_->finish(tree_->node_count(), tree_->evictable_size(), tree_->protected_size());
      }
    }
  }
  void flush_recording() {
    std::lock_guard<std::mutex> g(mu_);
    if (rec_) rec_->flush();
  }
  // Under the tree's mutex: a window's next segment changes it.
  std::optional<std::string> recording_path() {
    std::lock_guard<std::mutex> g(mu_);
    return rec_ ? std::optional<std::string>(rec_->path()) : std::nullopt;
  }
  // The recording's files on disk, oldest first: a window's last two segments, else the one.
  std::vector<std::string> recording_segments() {
    std::lock_guard<std::mutex> g(mu_);
    if (!rec_) return {};
    if (!window_) return {rec_->path()};
    return window_->live();
  }
  // Under the tree's mutex (a call on another thread may end the recording).
  bool recording_now() {
    std::lock_guard<std::mutex> g(mu_);
    return recording();
  }

  int32_t page_size() const { return tree_->page_size(); }
  const std::string& policy() const { return policy_; }
  bool poisoned() {
    std::lock_guard<std::mutex> g(mu_);
    return poisoned_;
  }
  std::string poison_message() {
    std::lock_guard<std::mutex> g(mu_);
    return poison_message_;
  }

  py::tuple match_prefix(py::handle tokens_obj, Namespace ns) {
    Tokens tokens(tokens_obj, "tokens");
    MatchResult r;
    SlotBuffer slots;
    NodeId last = 0;
    run(tokens.size(), [&] {
      // The tree before the call: the footer's sizes if the recording has to end before it.
      size_t nodes_before = 0;
      int64_t evictable_before = 0, protected_before = 0;
      if (recording()) {
        nodes_before = tree_->node_count();
        evictable_before = tree_->evictable_size();
        protected_before = tree_->protected_size();
        tokens.visit([&](auto key) { rec_->begin_match(ns, key); });
      }
      on_fail_ = sim::CallKind::kMatch;
      r = tokens.visit([&](auto key) { return tree_->match_prefix(ns, key); });
      slots = SlotBuffer::filled(r.device_indices.size(),
                                 [&](SlotIndex* out) { r.device_indices.copy_slots_to(out); });
      stats_.match_calls += 1;
      stats_.match_tokens += static_cast<int64_t>(aligned(tokens.size()));
      stats_.hit_tokens += r.device_hit_length();
      last = r.last_device_node->id;  // under the mutex: the node may be freed once it is released
      if (recording()) {
        const sim::CallOutcome out{r.device_hit_length(), r.last_device_node->id, 0};
        if (rec_->finish_match(&out)) {
          rec_->finish_call(sim::CallKind::kMatch, &out);
          rec_->produced(out.node);
          after_call();
        } else {
          // A trace holds 32-bit ids; this key matched nothing past one. The recording ends
          // before this call, with the tree as it was then.
          rec_->finish(nodes_before, evictable_before, protected_before, std::nullopt,
                       /*truncated=*/true);
        }
      }
    });
    return py::make_tuple(to_numpy(std::move(slots)), last);
  }

  py::tuple insert(py::handle tokens_obj, py::handle value_obj, Namespace ns) {
    Tokens tokens(tokens_obj, "tokens");
    IntBuffer value(value_obj, "value");
    const size_t n = aligned(tokens.size());
    if (value.size() < n) {
      throw py::value_error("value has " + std::to_string(value.size()) +
                            " slots, fewer than the " + std::to_string(n) +
                            " page-aligned tokens of the key");
    }
    // int64 slots are read in place (int32 ones widened once).
    std::vector<SlotIndex> widened;
    std::span<const SlotIndex> slots;
    if (value.data64() != nullptr) {
      slots = std::span<const SlotIndex>(value.data64(), n);
    } else {
      widened.assign(value.data32(), value.data32() + n);
      slots = widened;
    }
    // The tree's form of slots [b, e), checked and classified in one vectorised pass.
    const auto page = static_cast<size_t>(page_size());
    auto value_of = [&](size_t b, size_t e) {
      const SlotScan scan = scan_slots(slots.data() + b, e - b, page);
      if (scan.all_or < 0) {
        const auto bad =
            static_cast<size_t>(std::find_if(slots.begin() + static_cast<ptrdiff_t>(b), slots.end(),
                                             [](int64_t v) { return v < 0; }) -
                                slots.begin());
        throw py::value_error("value[" + std::to_string(bad) + "] = " + std::to_string(slots[bad]) +
                              " is not a slot index");
      }
      return device_value(slots.subspan(b, e - b), tree_->page_size(), scan.page_runs);
    };
    InsertResult r;
    NodeId last = 0;
    run(n, [&] {
      // The tree before the call: the footer's sizes if the recording has to end before it.
      const bool rec = recording();
      size_t nodes_before = 0;
      int64_t evictable_before = 0, protected_before = 0;
      if (rec) {
        nodes_before = tree_->node_count();
        evictable_before = tree_->evictable_size();
        protected_before = tree_->protected_size();
        tokens.visit([&](auto key) { rec_->begin_insert(ns, key.first(n)); });
      }
      on_fail_ = sim::CallKind::kInsert;
      // Only the slots the tree stores are read and checked (and recorded): a match's part of
      // the key keeps the tree's slots (the caller frees its own as duplicates).
      const RadixTree::InsertValueSource source =
          rec ? RadixTree::InsertValueSource([&](size_t b, size_t e) {
            IndexVector v = value_of(b, e);
            rec_->note_value(b, v);
            return v;
          })
              : RadixTree::InsertValueSource(value_of);
      try {
        r = tokens.visit([&](auto key) { return tree_->insert(ns, key, source); });
      } catch (const AssertionFailure&) {
        throw;  // guarded() records the failing call
      } catch (...) {
        if (rec) rec_->drop_call();  // refused with the tree unchanged: no call to record
        throw;
      }
      stats_.insert_calls += 1;
      stats_.insert_tokens += static_cast<int64_t>(n);
      stats_.new_tokens += static_cast<int64_t>(n) - r.prefix_len;
      // Under the mutex: another thread's evict may free the node once it is released.
      last = r.last_node != nullptr ? r.last_node->id : tree_->root()->id;
      if (recording()) {
        const NodeId node = r.last_node != nullptr ? r.last_node->id : tree_->root()->id;
        const sim::CallOutcome out{r.prefix_len, node, 0};
        if (rec_->value_recordable()) {
          rec_->finish_insert(r.last_node != nullptr ? r.last_node : tree_->root());
          rec_->finish_call(sim::CallKind::kInsert, &out);
          rec_->produced(node);
          after_call();
        } else {
          // The tree read slots in ranges with a gap between them (a refill before a new leaf;
          // never in this device-only tree): the recording ends before this call.
          rec_->drop_call();
          rec_->finish(nodes_before, evictable_before, protected_before, std::nullopt,
                       /*truncated=*/true);
        }
      }
    });
    return py::make_tuple(r.prefix_len, last);
  }

  PyLock lock(NodeId node_id) {
    PyLock out;
    run(0, [&] {
      TreeNode* node = tree_->find(node_id);
      if (node == nullptr)
        throw py::value_error("lock: node " + std::to_string(node_id) + " does not exist");
      if (node->evicted())
        throw py::value_error("lock: node " + std::to_string(node_id) + " is evicted");
      if (recording()) {
        if (rec_->begin_lock_of(node_id)) {
          out.call = rec_->next_index();
        } else {
          stop_recording();  // a node no recorded call returned: the trace could not name it
        }
      }
      on_fail_ = sim::CallKind::kLock;
      const int64_t before = tree_->evictable_size();
      out.record = tree_->lock(*node);
      out.delta = tree_->evictable_size() - before;
      out.node = node_id;
      out.tree = serial_;
      stats_.lock_calls += 1;
      if (out.call >= 0 && recording()) {
        rec_->held(out.call, out.record);
        const sim::CallOutcome none;
        rec_->finish_call(sim::CallKind::kLock, &none);
        after_call();
      }
    });
    return out;
  }

  // -> the change of evictable_size() (>= 0), SGLang's dec_lock_ref delta.
  int64_t unlock(const PyLock& lock) {
    // A caller error, refused before the core sees the record: it names nodes of another tree.
    if (lock.tree != serial_) {
      throw py::value_error("unlock: this Lock (node " + std::to_string(lock.node) +
                            ") was taken on another tree");
    }
    int64_t delta = 0;
    run(0, [&] {
      const bool rec = recording() && rec_->begin_unlock_of(lock.call, lock.record);
      if (recording() && !rec) stop_recording();
      on_fail_ = sim::CallKind::kUnlock;
      const int64_t before = tree_->evictable_size();
      tree_->unlock(lock.record);
      delta = tree_->evictable_size() - before;
      stats_.unlock_calls += 1;
      if (rec && recording()) {
        rec_->released(lock.call);
        const sim::CallOutcome none;
        rec_->finish_call(sim::CallKind::kUnlock, &none);
        after_call();
      }
    });
    return delta;
  }

  // SGLang's inc_lock_ref / dec_lock_ref, by node: lock_ref keeps the lock on the node's stack
  // and returns its delta (<= 0); unlock_ref releases the one taken last on that node and
  // returns its delta (>= 0). The same calls as lock / unlock (and recorded as them), without a
  // Lock object for the caller to keep. The stacks are touched with the GIL held.
  int64_t lock_ref(NodeId node_id) {
    PyLock l = lock(node_id);
    ref_locks_[node_id].push_back(l);
    return l.delta;
  }
  int64_t unlock_ref(NodeId node_id) {
    auto it = ref_locks_.find(node_id);
    if (it == ref_locks_.end() || it->second.empty()) {
      throw CallError("dec_lock_ref: node " + std::to_string(node_id) +
                      " holds no lock taken by inc_lock_ref");
    }
    const int64_t delta = unlock(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) ref_locks_.erase(it);
    return delta;
  }

  // Frees at least `tokens` device tokens (whole LRU leaves), as SGLang's RadixCache.evict.
  // Returns (freed slots, [(node id, tokens)] in eviction order[, [path tokens] if with_paths]).
  py::tuple evict(int64_t tokens, bool with_paths) {
    if (tokens < 0)
      throw py::value_error("evict: num_tokens must be >= 0, got " + std::to_string(tokens));
    sim::EvictedLeaves ev;
    SlotBuffer freed;
    run(kReleaseGilTokens, [&] {
      if (recording()) rec_->begin_evict(tokens);
      on_fail_ = sim::CallKind::kEvict;
      ev = sim::evict_device_leaves(*tree_, tokens, with_paths);
      freed = SlotBuffer::filled(static_cast<size_t>(ev.freed_tokens),
                                 [&](SlotIndex* out) { ev.copy_slots_to(out); });
      const int64_t done = ev.freed_tokens;
      stats_.evict_calls += 1;
      stats_.evict_requested += tokens;
      stats_.evicted_tokens += done;
      stats_.evicted_nodes += static_cast<int64_t>(ev.nodes.size());
      if (recording()) {
        const sim::CallOutcome out{done, 0, sim::hash_freed_slots(ev, sim::kSlotsHashLatest)};
        rec_->finish_call(sim::CallKind::kEvict, &out);
        for (const auto& [id, n] : ev.nodes)
          rec_->forget(id);
        after_call();
      }
    });
    auto& nodes = ev.nodes;
    auto& paths = ev.paths;
    py::list node_list;
    for (const auto& [id, n] : nodes)
      node_list.append(py::make_tuple(id, n));
    if (!with_paths) return py::make_tuple(to_numpy(std::move(freed)), node_list);
    py::list path_list;
    for (auto& p : paths) {
      path_list.append(py::array_t<int32_t>(static_cast<py::ssize_t>(p.size()), p.data()));
    }
    return py::make_tuple(to_numpy(std::move(freed)), node_list, path_list);
  }

  int64_t evictable_size() {
    return read([&] { return tree_->evictable_size(); });
  }
  int64_t protected_size() {
    return read([&] { return tree_->protected_size(); });
  }
  int64_t total_size() {
    return read([&] { return tree_->evictable_size() + tree_->protected_size(); });
  }
  size_t node_count() {
    return read([&] { return tree_->node_count(); });
  }
  NodeId root_id() {
    return read([&] { return tree_->root()->id; });
  }
  bool contains(NodeId id) {
    return read([&] { return tree_->find(id) != nullptr; });
  }

  // Node ids, root first, children in key order (deterministic).
  std::vector<NodeId> node_ids() {
    return read([&] {
      std::vector<NodeId> ids;
      tree_->for_each_node([&](const TreeNode& n) { ids.push_back(n.id); });
      return ids;
    });
  }

  py::dict node_info(NodeId id) {
    py::dict d;
    read([&] {
      const TreeNode& n = node_or_throw(id);
      d["id"] = n.id;
      d["parent"] = n.parent != nullptr ? py::cast(n.parent->id) : py::none();
      d["namespace"] = n.ns;
      d["tokens"] = n.token_count();
      d["lock_ref"] = n.full().lock_ref;
      d["evicted"] = n.evicted();
      d["last_access"] = n.last_access;
      d["hit_count"] = n.hit_count;
      py::list children;
      for (const TreeNode* child : n.children.sorted())
        children.append(child->id);
      d["children"] = children;
      return 0;
    });
    return d;
  }

  // Copies: a node's storage may be split or freed by the next call, so no view is handed out.
  py::array_t<int32_t> node_key(NodeId id) {
    std::vector<Token> key = read([&] {
      const TokenRun& k = node_or_throw(id).key;
      return std::vector<Token>(k.begin(), k.end());
    });
    return py::array_t<int32_t>(static_cast<py::ssize_t>(key.size()), key.data());
  }
  py::array_t<int64_t> node_value(NodeId id) {
    std::vector<SlotIndex> v = read([&] {
      const TreeNode& n = node_or_throw(id);
      return n.evicted() ? std::vector<SlotIndex>{} : n.full().value->slots();
    });
    return to_numpy(std::move(v));
  }
  py::array_t<int32_t> path_tokens(NodeId id) {
    std::vector<Token> p = read([&] { return RadixTree::prefix_tokens(node_or_throw(id)); });
    return py::array_t<int32_t>(static_cast<py::ssize_t>(p.size()), p.data());
  }

  // [(invariant, detail, node or None, slot or None)]; empty when every invariant holds.
  py::list sanity_check() {
    SanityReport report;
    read([&] {
      tree_->sanity_check(report);
      return 0;
    });
    py::list out;
    for (const Violation& v : report.violations()) {
      out.append(py::make_tuple(v.invariant, v.detail, v.node ? py::cast(*v.node) : py::none(),
                                v.slot ? py::cast(*v.slot) : py::none()));
    }
    return out;
  }

  py::dict stats() {
    const CallStats s = read([&] { return stats_; });  // written by calls without the GIL
    py::dict d;
    d["match_calls"] = s.match_calls;
    d["match_tokens"] = s.match_tokens;
    d["hit_tokens"] = s.hit_tokens;
    d["insert_calls"] = s.insert_calls;
    d["insert_tokens"] = s.insert_tokens;
    d["new_tokens"] = s.new_tokens;
    d["evict_calls"] = s.evict_calls;
    d["evict_requested"] = s.evict_requested;
    d["evicted_tokens"] = s.evicted_tokens;
    d["evicted_nodes"] = s.evicted_nodes;
    d["lock_calls"] = s.lock_calls;
    d["unlock_calls"] = s.unlock_calls;
    return d;
  }

 private:
  size_t aligned(size_t n) const {
    const auto p = static_cast<size_t>(tree_->page_size());
    return n / p * p;
  }

  const TreeNode& node_or_throw(NodeId id) const {
    const TreeNode* n = tree_->find(id);
    if (n == nullptr) throw py::value_error("node " + std::to_string(id) + " does not exist");
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
      py::gil_scoped_release nogil;
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
  void after_call() {
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
  void stop_recording() {
    rec_->finish(tree_->node_count(), tree_->evictable_size(), tree_->protected_size(),
                 std::nullopt,
                 /*truncated=*/true);
  }

  std::unique_ptr<RadixTree> tree_;
  std::unique_ptr<CallRecorder> rec_;
  std::unique_ptr<RecordingWindow> window_;  // set: a rolling window of the last calls
  // lock_ref's locks by node, last taken last (looked up, never iterated).
  std::unordered_map<NodeId, std::vector<PyLock>> ref_locks_;
  std::optional<sim::CallKind> on_fail_;  // the call a failing assertion belongs to
  std::string policy_;
  std::mutex mu_;
  const uint64_t serial_ = g_next_tree_serial.fetch_add(1);
  bool poisoned_ = false;
  std::string poison_message_;
  CallStats stats_;
};

}  // namespace
}  // namespace kvsim::python

PYBIND11_MODULE(_core, m) {
  using namespace kvsim::python;
  m.doc() = "kvsim's radix-tree core (see docs/sglang.md)";
  // Core assertions throw inside this process: a violation raises instead of aborting python.
  kvsim::set_assert_handler(&kvsim::throwing_assert_handler);

  static py::exception<std::runtime_error> base(m, "KvsimError", PyExc_RuntimeError);
  static py::exception<CoreAssertion> core_assertion(m, "CoreAssertionError", base.ptr());
  static py::exception<Poisoned> poisoned(m, "PoisonedError", base.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CoreAssertion& e) {
      PyErr_SetString(core_assertion.ptr(), e.what());
    } catch (const Poisoned& e) {
      PyErr_SetString(poisoned.ptr(), e.what());
    } catch (const CallError& e) {
      PyErr_SetString(base.ptr(), e.what());
    }
  });
  m.def(
      "_close_recordings",
      [] {
        std::vector<PyTree*> trees;
        {
          std::lock_guard<std::mutex> g(g_recording_mu);
          trees.assign(g_recording.begin(), g_recording.end());
        }
        for (PyTree* t : trees)
          t->close_recording();
      },
      "Ends every open recording (called at interpreter exit)");
  m.def(
      "_flush_recordings",
      [] {
        std::lock_guard<std::mutex> g(g_recording_mu);
        for (PyTree* t : g_recording)
          t->flush_recording();
      },
      "Writes every recording's buffered calls to its file");
  m.attr("TOKEN_MIN") = std::numeric_limits<kvsim::Token>::min();
  m.attr("TOKEN_MAX") = std::numeric_limits<kvsim::Token>::max();

  py::class_<PyLock>(m, "Lock", "A lock taken by RadixTree.lock; pass it back to unlock.")
      .def_property_readonly("node", [](const PyLock& l) { return l.node; })
      .def_property_readonly(
          "delta", [](const PyLock& l) { return l.delta; },
          "change of evictable_size() the lock made (<= 0)")
      .def("__repr__",
           [](const PyLock& l) { return "<kvsim.Lock node=" + std::to_string(l.node) + ">"; });

  py::class_<PyTree>(m, "RadixTree",
                     "kvsim's page-aligned radix tree; slots are the caller's (device tier).")
      .def(py::init<int32_t, const std::string&, py::object, uint64_t, uint64_t, double>(),
           py::arg("page_size") = 1, py::arg("eviction_policy") = "lru",
           py::arg("record") = py::none(), py::arg("record_max_calls") = 0,
           py::arg("record_window") = 0, py::arg("record_window_seconds") = 0.0,
           "record: a directory (one file per tree) or a .jsonl path; None reads KVSIM_RECORD.\n"
           "record_max_calls: keep the first N calls (KVSIM_RECORD_MAX_CALLS).\n"
           "record_window / record_window_seconds: keep the last N..2N calls / S..2S seconds in\n"
           "rotating segment files, each starting with a tree snapshot (KVSIM_RECORD_WINDOW,\n"
           "KVSIM_RECORD_WINDOW_SECONDS)")
      .def_property_readonly("recording_path", &PyTree::recording_path,
                             "the file being written (a window's current segment)")
      .def_property_readonly("recording_segments", &PyTree::recording_segments,
                             "the recording's files on disk, oldest first")
      .def_property_readonly("recording", &PyTree::recording_now)
      .def("close_recording", &PyTree::close_recording)
      .def("flush_recording", &PyTree::flush_recording)
      .def_property_readonly("page_size", &PyTree::page_size)
      .def_property_readonly("eviction_policy", &PyTree::policy)
      .def_property_readonly("poisoned", &PyTree::poisoned)
      .def_property_readonly("poison_message", &PyTree::poison_message)
      .def_property_readonly("root_id", &PyTree::root_id)
      .def("match_prefix", &PyTree::match_prefix, py::arg("tokens"), py::arg("namespace") = 0,
           "-> (int64 device indices, last device node id); splits a node where the match ends")
      .def("insert", &PyTree::insert, py::arg("tokens"), py::arg("value"), py::arg("namespace") = 0,
           "-> (prefix_len, last node id); the caller frees value[protected:prefix_len]")
      .def("lock", &PyTree::lock, py::arg("node"))
      .def("unlock", &PyTree::unlock, py::arg("lock"),
           "-> change of evictable_size() the unlock made (>= 0)")
      .def("lock_ref", &PyTree::lock_ref, py::arg("node"),
           "SGLang's inc_lock_ref: locks the node, keeps the lock; -> evictable_size() change")
      .def("unlock_ref", &PyTree::unlock_ref, py::arg("node"),
           "SGLang's dec_lock_ref: releases the node's last lock_ref lock; -> its change")
      .def("evict", &PyTree::evict, py::arg("num_tokens"), py::arg("with_paths") = false)
      .def("evictable_size", &PyTree::evictable_size)
      .def("protected_size", &PyTree::protected_size)
      .def("total_size", &PyTree::total_size)
      .def("node_count", &PyTree::node_count)
      .def("node_ids", &PyTree::node_ids)
      .def("node_info", &PyTree::node_info, py::arg("node"))
      .def("node_key", &PyTree::node_key, py::arg("node"))
      .def("node_value", &PyTree::node_value, py::arg("node"))
      .def("path_tokens", &PyTree::path_tokens, py::arg("node"))
      .def("__contains__", &PyTree::contains)
      .def("sanity_check", &PyTree::sanity_check)
      .def("stats", &PyTree::stats);
}
