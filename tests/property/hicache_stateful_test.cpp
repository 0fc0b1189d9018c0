// Stateful properties of HiCache (RapidCheck): the real cache on the deterministic CPU backend,
// driven by random command sequences, against a reference model.
//
// System under test (System): a HiCache, its CpuBackend and (in two configurations) a
// MemoryStorage tier, the RequestKVs of running requests, the locks held by the "scheduler"
// and a logical clock. Every command is one call (or one short protocol step) a scheduler
// makes: match, admit (RequestKV::admit + extend + forward), finish (insert), abort, retract
// (abort, keep the request) and resume (admit again), lock/unlock, evict, evict_host,
// evict_swa/evict_mamba, write_backup of a node, init_load_back, ready_to_load_host_cache,
// prefetch_from_storage with its progress/release and the storage "threads", stepping one
// stream of the CpuBackend by k ops (completing pending copies in any order), the poll point
// (check_hicache_events), a clock tick, and a full drain (flush + content check).
//
// The model (Model) knows what the driver intended: which requests exist and whether they are
// running or retracted, which locks are held, which prefetches may be live. It is exact about
// those, and the core must agree with it; it makes no claim about what is cached where (the
// cache is free to evict anything unlocked). After every command System::check() asserts
// what must hold whatever the cache chose:
//  1. sanity_check() is clean (every invariant the core checks itself: tree shape, locks,
//     accounting, slot ownership in every pool, residency, in-flight ops, stream lifetime);
//  2. the core agrees with the model: the same requests and locks exist, a retracted request
//     holds nothing, live prefetches are ones the model started;
//  3. which requests hold what: the device, SWA and Mamba slots requests hold are exactly the
//     sum of what each running RequestKV owns;
//  4. conservation: in every pool, free + tree-held + request-held (+ prefetch-held) slots
//     equal the capacity, on device and on host;
//  5. a prefix that is locked — by a lock command anchored on last_device_node or by a running
//     request — is still served from device to at least the locked depth (checked without
//     mutating the tree: the components' validators run over the path);
//  6. content: every host value whose write has been acknowledged holds the oracle's bytes,
//     and every device slot a match returns does too when no copy is pending; the Drain
//     command checks every device and host value of every node and every running request.
// At the end the property releases everything, drains every stream and the storage queue,
// and checks quiescence: no locks, no in-flight ops, nothing held by requests or prefetches;
// after evicting everything, the tree is the bare root and every slot of every pool is free.
//
// Replay: a failure prints the shrunk command list, one exact call per line (toks(ns,
// {branches}, tail) builds the tokens: tests/conformance/shape.h), and
//   kvsim property: replay with RC_PARAMS="seed=<seed>" ./kvsim_property_tests
//   --gtest_filter=<test>
// Runtime knobs through RC_PARAMS (max_success, max_size, seed); by default each property runs
// 100 cases of at most 50 commands.
#include <gtest/gtest.h>

#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "conformance/oracle_io.h"
#include "conformance/rc_replay.h"
#include "conformance/shape.h"
#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"
#include "core/common/assert.h"
#include "core/tiers/memory_storage.h"

namespace kvsim::property {
namespace {

using conformance::Shape;
using conformance::show;
using conformance::tokens_of;

constexpr const char* kBinary = "kvsim_property_tests";
constexpr int kMaxPages = 6;
constexpr int64_t kAll = int64_t{1} << 40;

struct Config {
  HiCacheOptions options;
  size_t storage_pages = 0;  // 0: no storage tier
  bool has_storage() const { return storage_pages > 0; }
};

Config write_through_storage() {
  return Config{.options = HiCacheOptions{.page_size = 4,
                                          .layer_count = 2,
                                          .item_bytes = 16,
                                          .device_tokens = 40,
                                          .host_tokens = 32,
                                          .write_policy = WritePolicy::kWriteThrough,
                                          .load_back_threshold_tokens = 1,
                                          .prefetch_threshold_tokens = 8,
                                          .prefetch_timeout_base_ticks = 300},
                .storage_pages = 48};
}

Config write_back_lfu() {
  return Config{.options = HiCacheOptions{.page_size = 2,
                                          .layer_count = 2,
                                          .item_bytes = 8,
                                          .device_tokens = 32,
                                          .host_tokens = 48,
                                          .write_policy = WritePolicy::kWriteBack,
                                          .eviction_policy = EvictionPolicy::kLfu,
                                          .load_back_threshold_tokens = 2}};
}

Config storage_pressure() {
  return Config{.options = HiCacheOptions{.page_size = 4,
                                          .layer_count = 1,
                                          .item_bytes = 8,
                                          .device_tokens = 32,
                                          .host_tokens = 20,
                                          .write_policy = WritePolicy::kWriteThrough,
                                          .load_back_threshold_tokens = 4,
                                          .prefetch_threshold_tokens = 4,
                                          .prefetch_capacity_fraction = 1.0,
                                          .prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete,
                                          .storage_batch_pages = 2},
                .storage_pages = 24};
}

Config hybrid_selective_storage() {
  return Config{.options = HiCacheOptions{.page_size = 4,
                                          .layer_count = 2,
                                          .item_bytes = 16,
                                          .device_tokens = 48,
                                          .host_tokens = 64,
                                          .write_policy = WritePolicy::kWriteThroughSelective,
                                          .load_back_threshold_tokens = 1,
                                          .prefetch_threshold_tokens = 8,
                                          .prefetch_stop_policy = PrefetchStopPolicy::kBestEffort,
                                          .swa_window_tokens = 8,
                                          .swa_device_tokens = 32,
                                          .mamba_device_states = 6,
                                          .mamba_state_bytes = 32},
                .storage_pages = 64};
}

// ------------------------------------------------------------------------------------------
// The model: what the driver intended.
struct Model {
  enum class Phase : uint8_t { kRunning, kRetracted };
  struct Request {
    Shape shape;
    Phase phase = Phase::kRunning;
  };
  const Config* config = nullptr;
  std::map<uint32_t, Request> requests;
  std::map<uint32_t, Shape> locks;
  std::set<uint32_t> prefetches;  // started (maybe refused or finished since)
  std::vector<Shape> history;     // shapes admitted so far (for prefix reuse)
  uint32_t next_id = 1;

  int32_t page() const { return config->options.page_size; }
  std::vector<uint32_t> request_ids(std::optional<Phase> phase = std::nullopt) const {
    std::vector<uint32_t> out;
    for (const auto& [id, r] : requests) {
      if (!phase || r.phase == *phase) out.push_back(id);
    }
    return out;
  }
};

// ------------------------------------------------------------------------------------------
// The system under test.
struct Request {
  std::unique_ptr<RequestKV> kv;
  Shape shape;
  std::vector<Token> tokens;
  bool running = false;  // admitted and extended (false: retracted, or the pools said no)
  bool resumed = false;
};

struct HeldLock {
  LockRecord record;
  Shape shape;
  size_t locked_tokens = 0;  // device depth the lock must keep matchable (0: no claim)
};

// The deepest prefix of `tokens` every component would serve from device, found without
// splitting or touching anything (RadixTree::match_prefix mutates).
size_t peek_device_depth(const RadixTree& tree, Namespace ns, std::span<const Token> tokens) {
  const auto page = static_cast<size_t>(tree.page_size());
  const size_t aligned = tokens.size() / page * page;
  std::vector<std::unique_ptr<MatchValidator>> validators;
  for (const auto& c : tree.components())
    validators.push_back(c->make_validator());
  const TreeNode* node = tree.root();
  size_t pos = 0;
  size_t depth = 0;
  while (pos < aligned) {
    const TreeNode* found =
        node->children.scan(ns, std::span<const Token>(tokens).subspan(pos, page));
    if (found == nullptr) break;
    const TreeNode& child = *found;
    if (child.key.size() > aligned - pos ||
        !std::equal(child.key.begin(), child.key.end(),
                    tokens.begin() + static_cast<ptrdiff_t>(pos))) {
      break;  // the prefix ends inside this node
    }
    pos += child.key.size();
    bool device = true;
    for (auto& v : validators)
      device = v->visit(child).device && device;
    if (device) depth = pos;
    node = &child;
  }
  return depth;
}

class System {
 public:
  explicit System(const Config& config)
      : config_(config),
        storage_(config.has_storage() ? std::make_unique<MemoryStorage>(config.storage_pages)
                                      : nullptr),
        cache_(std::make_unique<HiCache>(backend_, config.options, storage_.get())) {}

  ~System() {
    // Tolerate a failed run: a RequestKV still active (its destructor asserts) is aborted, or
    // leaked when even that fails, so that RapidCheck reports the original failure.
    for (auto& [id, r] : requests_) {
      if (!r.kv || !r.kv->active()) continue;
      try {
        r.kv->abort();
      } catch (...) {
        static_cast<void>(r.kv.release());
      }
    }
  }

  HiCache& cache() { return *cache_; }
  CpuBackend& backend() { return backend_; }
  const Config& config() const { return config_; }
  std::map<uint32_t, Request>& requests() { return requests_; }
  std::map<uint32_t, HeldLock>& locks() { return locks_; }
  uint64_t& now() { return now_; }

  // Admit + extend + forward (the RequestKV protocol up to the model forward).
  void admit(uint32_t id, const Shape& shape, bool allow_load_back, bool resume = false) {
    Request& r = requests_[id];
    r.resumed = resume;
    r.shape = shape;
    r.tokens = tokens_of(shape, config_.options.page_size);
    r.kv = std::make_unique<RequestKV>(*cache_, shape.ns);
    r.running = false;
    if (!r.kv->admit(r.tokens, allow_load_back)) return;  // no Mamba state slot
    if (!r.kv->extend(r.tokens.size())) {
      r.kv->abort();  // admission refused: the pools cannot hold it now
      return;
    }
    conformance::forward(*cache_, *r.kv, r.tokens, r.kv->owned_from());
    r.running = true;
    if (r.resumed && r.kv->owned_from() > 0) ++resumed_with_cache_;
  }
  int resumed_with_cache() const { return resumed_with_cache_; }

  // A request from admission to finish in one go; nothing of it stays (the id is not kept).
  void serve(const Shape& shape) {
    constexpr uint32_t kTransient = 0;  // never a model id
    admit(kTransient, shape, /*allow_load_back=*/true);
    Request& r = requests_.at(kTransient);
    if (r.running) r.kv->finish(r.tokens);
    requests_.erase(kTransient);
  }

  // Every check of the file comment, 1 to 6.
  void check(const Model& model) {
    SanityReport report;
    cache_->sanity_check(report);
    if (!report.ok()) RC_FAIL("sanity_check: " + report.summary());
    check_model(model);
    check_holdings();
    check_conservation();
    check_locked_prefixes();
    check_host_content();
  }

  // Releases everything and drains every queue; then quiescence and no leak.
  void quiesce_and_check(const Model& model) {
    for (auto& [id, r] : requests_) {
      if (r.running) r.kv->abort();
      r.running = false;
    }
    for (uint32_t rid : model.prefetches)
      cache_->release_aborted_request(rid);
    for (auto& [id, l] : locks_)
      cache_->unlock(l.record);
    locks_.clear();
    cache_->ready_to_load_host_cache();
    cache_->flush();
    if (storage_) {
      while (cache_->storage_backup_step()) {
      }
      cache_->check_hicache_events();
    }
    cache_->flush();
    RC_ASSERT(backend_.pending_ops() == 0u);
    RC_ASSERT(cache_->controller().pending_writes() == 0u);
    RC_ASSERT(cache_->controller().pending_loads() == 0u);
    RC_ASSERT(cache_->prefetches().empty());
    RC_ASSERT(cache_->prefetch_tokens_occupied() == 0);
    RC_ASSERT(cache_->request_held_tokens() == 0);
    RC_ASSERT(cache_->tree().protected_size() == 0);
    cache_->tree().for_each_node([&](const TreeNode& n) {
      for (size_t t = 0; t < kComponentTypesMax; ++t) {
        const int32_t expected = (n.is_root() && t == 0) ? 1 : 0;
        if (n.component(t).lock_ref != expected || n.component(t).host_lock_ref != 0) {
          RC_FAIL("node " + std::to_string(n.id) + " still locked at quiescence (component " +
                  std::to_string(t) + ")");
        }
      }
    });
    for (const ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
      if (const SidePool* pool = cache_->side_pool(t)) {
        RC_ASSERT(pool->request_slots().held_pages() == 0);
        RC_ASSERT(cache_->tree().aux_protected_size(t) == 0);
      }
    }
    check(model_without_live_state(model));
    check_all_content();
    for (int round = 0; round < 64; ++round) {
      if (cache_->evict(kAll) + cache_->evict_host(kAll) == 0) break;
    }
    RC_ASSERT(cache_->tree().node_count() == 1u);
    SanityReport report;
    cache_->sanity_check(report);
    if (!report.ok()) RC_FAIL("sanity_check after evicting everything: " + report.summary());
    const auto all_free = [](const PagedSlotAllocator& a) {
      return a.available_size() == a.capacity();
    };
    RC_ASSERT(all_free(cache_->device_slots()));
    RC_ASSERT(all_free(cache_->host_slots()));
    for (const ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
      if (SidePool* pool = cache_->side_pool(t)) {
        RC_ASSERT(all_free(pool->device_slots()));
        RC_ASSERT(all_free(pool->host_slots()));
      }
    }
  }

  // Device and host values of every node, and every running request's slots (synchronizes).
  void check_all_content() {
    backend_.synchronize();
    cache_->tree().for_each_node([&](const TreeNode& n) {
      if (auto e = conformance::node_all_values_error(*cache_, n)) RC_FAIL("content: " + *e);
    });
    for (auto& [id, r] : requests_) {
      if (!r.running) continue;
      if (auto e = conformance::request_error(*cache_, *r.kv, r.tokens)) {
        RC_FAIL("request r" + std::to_string(id) + ": " + *e);
      }
    }
  }

 private:
  static Model model_without_live_state(const Model& model) {
    Model m = model;
    for (auto& [id, r] : m.requests)
      r.phase = Model::Phase::kRetracted;
    m.locks.clear();
    return m;
  }

  void check_model(const Model& model) {
    RC_ASSERT(requests_.size() == model.requests.size());
    for (const auto& [id, r] : requests_) {
      auto it = model.requests.find(id);
      RC_ASSERT(it != model.requests.end());
      RC_ASSERT(it->second.shape == r.shape);
      if (it->second.phase == Model::Phase::kRetracted) RC_ASSERT(!r.running);
      RC_ASSERT(r.kv->active() == r.running);
    }
    RC_ASSERT(locks_.size() == model.locks.size());
    for (const auto& [id, l] : locks_)
      RC_ASSERT(model.locks.count(id) == 1u);
    for (const auto& [rid, op] : cache_->prefetches())
      RC_ASSERT(model.prefetches.count(static_cast<uint32_t>(rid)) == 1u);
  }

  void check_holdings() {
    int64_t kv = 0;
    int64_t swa = 0;
    int64_t states = 0;
    for (const auto& [id, r] : requests_) {
      if (!r.running) continue;
      kv += static_cast<int64_t>(r.kv->kv().size() - r.kv->owned_from());
      if (r.kv->swa()) swa += static_cast<int64_t>(r.kv->swa()->size() - r.kv->owned_from());
      if (r.kv->mamba_state()) ++states;
    }
    RC_ASSERT(cache_->request_held_tokens() == kv);
    if (const SidePool* pool = cache_->side_pool(ComponentType::kSwa)) {
      RC_ASSERT(pool->request_slots().held_pages() * config_.options.page_size == swa);
    }
    if (const SidePool* pool = cache_->side_pool(ComponentType::kMamba)) {
      RC_ASSERT(pool->request_slots().held_pages() == states);
    }
  }

  void check_conservation() {
    const RadixTree& tree = cache_->tree();
    RC_ASSERT(cache_->available_device_size() + tree.evictable_size() + tree.protected_size() +
                  cache_->request_held_tokens() ==
              config_.options.device_tokens);
    int64_t prefetch_host = 0;
    for (const auto& [rid, op] : cache_->prefetches()) {
      if (op.host_indices) prefetch_host += static_cast<int64_t>(op.host_indices->size());
    }
    RC_ASSERT(cache_->host_slots().available_size() + tree.host_size() + prefetch_host ==
              config_.options.host_tokens);
    for (const ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
      SidePool* pool = cache_->side_pool(t);
      if (pool == nullptr) continue;
      const int64_t page = pool->device_slots().page_size();
      RC_ASSERT(pool->device_slots().available_size() + tree.aux_evictable_size(t) +
                    tree.aux_protected_size(t) + pool->request_slots().held_pages() * page ==
                pool->device_slots().capacity());
      int64_t host = 0;
      tree.for_each_node([&](const TreeNode& n) {
        if (n.component(t).host_value)
          host += static_cast<int64_t>(n.component(t).host_value->size());
      });
      RC_ASSERT(pool->host_slots().available_size() + host == pool->host_slots().capacity());
    }
  }

  void check_locked_prefixes() {
    const RadixTree& tree = cache_->tree();
    for (const auto& [id, l] : locks_) {
      if (l.locked_tokens == 0) continue;
      const size_t depth =
          peek_device_depth(tree, l.shape.ns, tokens_of(l.shape, config_.options.page_size));
      if (depth < l.locked_tokens) {
        RC_FAIL("lock l" + std::to_string(id) + " on " + show(l.shape) + " held " +
                std::to_string(l.locked_tokens) + " device tokens; only " + std::to_string(depth) +
                " still match");
      }
    }
    for (const auto& [id, r] : requests_) {
      if (!r.running) continue;
      const size_t depth = peek_device_depth(tree, r.shape.ns, r.tokens);
      if (depth < r.kv->owned_from()) {
        RC_FAIL("request r" + std::to_string(id) + " holds " + std::to_string(r.kv->owned_from()) +
                " cached tokens; only " + std::to_string(depth) + " still match on device");
      }
    }
  }

  void check_host_content() {
    cache_->tree().for_each_node([&](const TreeNode& n) {
      if (n.write_through_pending) return;  // its copy may still be running
      if (auto e =
              conformance::node_all_values_error(*cache_, n, {.device = false, .host = true})) {
        RC_FAIL("host content: " + *e);
      }
    });
  }

  ScopedThrowingAsserts asserts_;  // core assertions throw: RapidCheck reports and shrinks them
  const Config& config_;
  CpuBackend backend_;
  std::unique_ptr<MemoryStorage> storage_;
  std::unique_ptr<HiCache> cache_;
  std::map<uint32_t, Request> requests_;
  std::map<uint32_t, HeldLock> locks_;
  uint64_t now_ = 0;
  int resumed_with_cache_ = 0;
};

using Command = rc::state::Command<Model, System>;

rc::Gen<Shape> shape_gen(const Model& m) {
  // Shapes admitted earlier are likely again (prefix reuse, resubmission, prefetch of what
  // was evicted).
  const rc::Gen<Shape> fresh = conformance::gen_shape(kMaxPages, m.page(), 2);
  if (m.history.empty()) return fresh;
  return rc::gen::weightedOneOf<Shape>({{2, fresh}, {3, rc::gen::elementOf(m.history)}});
}

// An integer in [lo, hi) over the whole range: RapidCheck scales inRange by the current size,
// which the command generator fixes at 49 (that would make the top of a small range rare).
template <typename T>
T any_in(T lo, T hi) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

std::string r(uint32_t id) {
  return "r" + std::to_string(id);
}

// --- Commands ----------------------------------------------------------------------------

struct Match : Command {
  Shape shape;
  explicit Match(const Model& m) : shape(*shape_gen(m)) {}
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const std::vector<Token> tokens = tokens_of(shape, m.page());
    const MatchResult res = cache.match_prefix(shape.ns, tokens);
    const auto page = static_cast<size_t>(m.page());
    const size_t device = res.device_indices.size();
    RC_ASSERT(device % page == 0);
    RC_ASSERT(device <= tokens.size() / page * page);
    const std::vector<Token> path = RadixTree::prefix_tokens(*res.last_device_node);
    RC_ASSERT(path.size() == device);
    RC_ASSERT(std::equal(path.begin(), path.end(), tokens.begin()));
    const size_t best = RadixTree::prefix_tokens(*res.best_match_node).size();
    RC_ASSERT(best >= device);
    RC_ASSERT(static_cast<int64_t>(best - device) == res.host_hit_length);
    if (sys.backend().pending_ops() == 0 && cache.controller().queued_loads() == 0) {
      for (TreeNode* n : RadixTree::path_to(*res.last_device_node)) {
        if (auto e =
                conformance::node_all_values_error(cache, *n, {.device = true, .host = false})) {
          RC_FAIL("matched device slot: " + *e);
        }
      }
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    os << "cache.match_prefix(" << shape.ns << ", " << conformance::show(shape) << ")";
  }
};

struct Admit : Command {
  uint32_t id;
  Shape shape;
  bool load_back;
  explicit Admit(const Model& m)
      : id(m.next_id),
        shape(*shape_gen(m)),
        load_back(*rc::gen::weightedElement<bool>({{4, true}, {1, false}})) {}
  void checkPreconditions(const Model& m) const override {
    RC_PRE(m.requests.count(id) == 0u && m.locks.count(id) == 0u && m.prefetches.count(id) == 0u);
  }
  void apply(Model& m) const override {
    m.requests[id] = Model::Request{shape, Model::Phase::kRunning};
    m.next_id = std::max(m.next_id, id + 1);
    if (std::find(m.history.begin(), m.history.end(), shape) == m.history.end()) {
      m.history.push_back(shape);
    }
  }
  void run(const Model& m, System& sys) const override {
    sys.admit(id, shape, load_back);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << r(id) << " = RequestKV(cache, " << shape.ns << "); " << r(id) << ".admit("
       << conformance::show(shape) << ", /*allow_load_back=*/" << (load_back ? "true" : "false")
       << "); " << r(id) << ".extend(size); forward(" << r(id) << ")";
  }
};

// A whole request in one go: admit, extend, forward, finish (a short prefill that completes
// within one scheduler iteration).
struct Serve : Command {
  Shape shape;
  explicit Serve(const Model& m) : shape(*shape_gen(m)) {}
  void apply(Model& m) const override {
    if (std::find(m.history.begin(), m.history.end(), shape) == m.history.end()) {
      m.history.push_back(shape);
    }
  }
  void run(const Model& m, System& sys) const override {
    sys.serve(shape);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << "serve(" << shape.ns << ", " << conformance::show(shape)
       << ")  // RequestKV admit, extend, forward, finish";
  }
};

// A command on one existing request, chosen among those in `phase` (any phase if nullopt).
struct OnRequest : Command {
  uint32_t id = 0;
  std::optional<Model::Phase> phase;
  OnRequest(const Model& m, std::optional<Model::Phase> p) : phase(p) {
    const auto ids = m.request_ids(p);
    RC_PRE(!ids.empty());
    id = *rc::gen::elementOf(ids);
  }
  void checkPreconditions(const Model& m) const override {
    auto it = m.requests.find(id);
    RC_PRE(it != m.requests.end());
    // Not RC_PRE(!phase || ... == *phase): RapidCheck captures the expression for its message
    // and evaluates both sides of the ||, dereferencing an empty optional (CI's hardened build
    // aborts on it).
    const bool in_phase = !phase || it->second.phase == *phase;
    RC_PRE(in_phase);
  }
};

struct Finish : OnRequest {
  explicit Finish(const Model& m) : OnRequest(m, Model::Phase::kRunning) {}
  void apply(Model& m) const override { m.requests.erase(id); }
  void run(const Model& m, System& sys) const override {
    Request& req = sys.requests().at(id);
    if (req.running) req.kv->finish(req.tokens);
    sys.requests().erase(id);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override { os << r(id) << ".finish(tokens)"; }
};

struct Abort : OnRequest {
  explicit Abort(const Model& m) : OnRequest(m, std::nullopt) {}
  void apply(Model& m) const override { m.requests.erase(id); }
  void run(const Model& m, System& sys) const override {
    Request& req = sys.requests().at(id);
    if (req.running) req.kv->abort();
    sys.cache().release_aborted_request(id);
    sys.requests().erase(id);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << r(id) << ".abort(); cache.release_aborted_request(" << id << ")";
  }
};

struct Retract : OnRequest {
  explicit Retract(const Model& m) : OnRequest(m, Model::Phase::kRunning) {}
  void apply(Model& m) const override { m.requests[id].phase = Model::Phase::kRetracted; }
  void run(const Model& m, System& sys) const override {
    Request& req = sys.requests().at(id);
    if (req.running) req.kv->abort();
    req.running = false;
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override { os << r(id) << ".abort()  // retract"; }
};

struct Resume : OnRequest {
  explicit Resume(const Model& m) : OnRequest(m, Model::Phase::kRetracted) {}
  void apply(Model& m) const override { m.requests[id].phase = Model::Phase::kRunning; }
  void run(const Model& m, System& sys) const override {
    const Shape shape = sys.requests().at(id).shape;
    sys.admit(id, shape, /*allow_load_back=*/true, /*resume=*/true);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << r(id) << ".admit(tokens); " << r(id) << ".extend(size); forward(" << r(id)
       << ")  // resume";
  }
};

struct Lock : Command {
  uint32_t id;
  Shape shape;
  bool on_best_match;
  explicit Lock(const Model& m)
      : id(m.next_id),
        shape(*shape_gen(m)),
        on_best_match(*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) {}
  void checkPreconditions(const Model& m) const override {
    RC_PRE(m.requests.count(id) == 0u && m.locks.count(id) == 0u && m.prefetches.count(id) == 0u);
  }
  void apply(Model& m) const override {
    m.locks[id] = shape;
    m.next_id = std::max(m.next_id, id + 1);
  }
  void run(const Model& m, System& sys) const override {
    const MatchResult res = sys.cache().match_prefix(shape.ns, tokens_of(shape, m.page()));
    TreeNode& anchor = on_best_match ? *res.best_match_node : *res.last_device_node;
    HeldLock held{.record = sys.cache().lock(anchor), .shape = shape};
    if (!on_best_match) held.locked_tokens = res.device_indices.size();
    sys.locks()[id] = std::move(held);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << "l" << id << " = cache.lock(*cache.match_prefix(" << shape.ns << ", "
       << conformance::show(shape) << ")."
       << (on_best_match ? "best_match_node" : "last_device_node") << ")";
  }
};

struct Unlock : Command {
  uint32_t id = 0;
  explicit Unlock(const Model& m) {
    RC_PRE(!m.locks.empty());
    std::vector<uint32_t> ids;
    for (const auto& [k, v] : m.locks)
      ids.push_back(k);
    id = *rc::gen::elementOf(ids);
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(m.locks.count(id) == 1u); }
  void apply(Model& m) const override { m.locks.erase(id); }
  void run(const Model& m, System& sys) const override {
    sys.cache().unlock(sys.locks().at(id).record);
    sys.locks().erase(id);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override { os << "cache.unlock(l" << id << ")"; }
};

// Evictions. kind: 0 device tokens, 1 host tokens, 2 SWA slots, 3 Mamba states.
struct Evict : Command {
  int kind;
  int64_t amount;  // the call's argument
  explicit Evict(const Model& m) : kind(any_in<int>(0, 4)) {
    const auto units = any_in<int64_t>(1, 17);
    amount = kind == 3 ? units : units * m.page();
    checkPreconditions(m);
  }
  void checkPreconditions(const Model& m) const override {
    if (kind == 2) RC_PRE(m.config->options.has_swa());
    if (kind == 3) RC_PRE(m.config->options.has_mamba());
  }
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    switch (kind) {
      case 0:
        cache.evict(amount);
        break;
      case 1:
        cache.evict_host(amount);
        break;
      case 2:
        cache.evict_swa(amount);
        break;
      default:
        cache.evict_mamba(amount);
        break;
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    static constexpr const char* kNames[] = {"evict", "evict_host", "evict_swa", "evict_mamba"};
    os << "cache." << kNames[kind] << "(" << amount << ")";
  }
};

struct Backup : Command {
  Shape shape;
  uint32_t pick;
  explicit Backup(const Model& m) : shape(*shape_gen(m)), pick(any_in<uint32_t>(0, kMaxPages)) {}
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const MatchResult res = cache.match_prefix(shape.ns, tokens_of(shape, m.page()));
    const std::vector<TreeNode*> path = RadixTree::path_to(*res.last_device_node);
    if (!path.empty()) {
      TreeNode& node = *path[pick % path.size()];
      if (!node.evicted() && !node.backed_up()) cache.write_backup(node);
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    os << "cache.write_backup(path_to(match_prefix(" << shape.ns << ", " << conformance::show(shape)
       << ").last_device_node)[" << pick << " % size])";
  }
};

struct LoadBack : Command {
  Shape shape;
  bool start;
  explicit LoadBack(const Model& m) : shape(*shape_gen(m)), start(*rc::gen::arbitrary<bool>()) {}
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const MatchResult res = cache.match_prefix(shape.ns, tokens_of(shape, m.page()));
    if (res.best_match_node != res.last_device_node) {
      const LoadBackResult lb = cache.init_load_back(*res.best_match_node);
      if (lb.loaded) RC_ASSERT(lb.last_node == res.best_match_node);
      if (start) cache.ready_to_load_host_cache();
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    os << "cache.init_load_back(*cache.match_prefix(" << shape.ns << ", "
       << conformance::show(shape) << ").best_match_node)"
       << (start ? "; cache.ready_to_load_host_cache()" : "");
  }
};

struct StartLoads : Command {
  void run(const Model& m, System& sys) const override {
    sys.cache().ready_to_load_host_cache();
    sys.check(m);
  }
  void show(std::ostream& os) const override { os << "cache.ready_to_load_host_cache()"; }
};

// Completes pending copies: k ops of one stream (0 compute, 1 write, 2 load).
struct Step : Command {
  int stream;
  int k;
  Step() : stream(any_in<int>(0, 3)), k(any_in<int>(1, 9)) {}
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const StreamId ids[] = {sys.backend().compute_stream(), cache.controller().write_stream(),
                            cache.controller().load_stream()};
    for (int i = 0; i < k; ++i) {
      if (!sys.backend().step(ids[stream])) break;
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    static constexpr const char* kNames[] = {"compute", "write", "load"};
    os << "backend.step(" << kNames[stream] << ") x" << k;
  }
};

struct Poll : Command {
  void run(const Model& m, System& sys) const override {
    sys.cache().check_hicache_events();
    sys.check(m);
  }
  void show(std::ostream& os) const override { os << "cache.check_hicache_events()"; }
};

// Every queue runs dry: queued loads are issued, every stream completes, acks are consumed,
// the storage backup thread finishes its queue; then every value is checked.
struct Drain : Command {
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    cache.ready_to_load_host_cache();
    cache.flush();
    if (cache.storage_enabled()) {
      while (cache.storage_backup_step()) {
      }
      cache.check_hicache_events();
    }
    sys.check(m);
    sys.check_all_content();
  }
  void show(std::ostream& os) const override {
    os << "drain()  // ready_to_load_host_cache, flush, storage_backup_step until idle, poll; "
          "check every value";
  }
};

struct Prefetch : Command {
  uint32_t id;
  Shape shape;
  explicit Prefetch(const Model& m) : id(m.next_id), shape(*shape_gen(m)) {
    RC_PRE(m.config->has_storage());
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(m.config->has_storage());
    RC_PRE(m.requests.count(id) == 0u && m.locks.count(id) == 0u && m.prefetches.count(id) == 0u);
  }
  void apply(Model& m) const override {
    m.prefetches.insert(id);
    m.next_id = std::max(m.next_id, id + 1);
  }
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const std::vector<Token> tokens = tokens_of(shape, m.page());
    const MatchResult res = cache.match_prefix(shape.ns, tokens);
    cache.prefetch_from_storage(id, shape.ns, *res.last_host_node, tokens, sys.now());
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << "cache.prefetch_from_storage(" << id << ", " << shape.ns << ", *match_prefix("
       << conformance::show(shape) << ").last_host_node, tokens, now)";
  }
};

// The whole prefetch of one request in one go (what the storage threads and the scheduler do
// over several iterations): start, hit query, host allocation at the poll point, page reads,
// and the admission gate.
struct PrefetchNow : Command {
  uint32_t id;
  Shape shape;
  explicit PrefetchNow(const Model& m) : id(m.next_id), shape(*shape_gen(m)) {
    RC_PRE(m.config->has_storage());
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(m.config->has_storage());
    RC_PRE(m.requests.count(id) == 0u && m.locks.count(id) == 0u && m.prefetches.count(id) == 0u);
  }
  void apply(Model& m) const override {
    m.prefetches.insert(id);
    m.next_id = std::max(m.next_id, id + 1);
  }
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    const std::vector<Token> tokens = tokens_of(shape, m.page());
    const MatchResult res = cache.match_prefix(shape.ns, tokens);
    if (cache.prefetch_from_storage(id, shape.ns, *res.last_host_node, tokens, sys.now())) {
      while (cache.storage_query_step()) {
      }
      cache.check_hicache_events();
      while (cache.storage_io_step()) {
      }
      if (cache.check_prefetch_progress(id, sys.now())) cache.pop_prefetch_loaded_tokens(id);
    }
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << "prefetch_all_the_way(" << id << ", " << shape.ns << ", " << conformance::show(shape)
       << ")  // prefetch_from_storage, query steps, poll, io steps, check_prefetch_progress";
  }
};

struct OnPrefetch : Command {
  uint32_t id = 0;
  explicit OnPrefetch(const Model& m) {
    RC_PRE(!m.prefetches.empty());
    id = *rc::gen::elementOf(std::vector<uint32_t>(m.prefetches.begin(), m.prefetches.end()));
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(m.prefetches.count(id) == 1u); }
};

struct PrefetchProgress : OnPrefetch {
  using OnPrefetch::OnPrefetch;
  void run(const Model& m, System& sys) const override {
    if (sys.cache().check_prefetch_progress(id, sys.now()))
      sys.cache().pop_prefetch_loaded_tokens(id);
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    os << "if (cache.check_prefetch_progress(" << id << ", now)) cache.pop_prefetch_loaded_tokens("
       << id << ")";
  }
};

struct PrefetchRelease : OnPrefetch {
  using OnPrefetch::OnPrefetch;
  void apply(Model& m) const override { m.prefetches.erase(id); }
  void run(const Model& m, System& sys) const override {
    sys.cache().release_aborted_request(id);
    sys.check(nextState(m));
  }
  void show(std::ostream& os) const override {
    os << "cache.release_aborted_request(" << id << ")";
  }
};

// One of the emulated storage threads (0 query, 1 io, 2 backup), k units of work.
struct StorageStep : Command {
  int kind;
  int k;
  explicit StorageStep(const Model& m) : kind(any_in<int>(0, 3)), k(any_in<int>(1, 5)) {
    RC_PRE(m.config->has_storage());
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(m.config->has_storage()); }
  void run(const Model& m, System& sys) const override {
    HiCache& cache = sys.cache();
    for (int i = 0; i < k; ++i) {
      const bool worked = kind == 0   ? cache.storage_query_step()
                          : kind == 1 ? cache.storage_io_step()
                                      : cache.storage_backup_step();
      if (!worked) break;
    }
    sys.check(m);
  }
  void show(std::ostream& os) const override {
    static constexpr const char* kNames[] = {"storage_query_step", "storage_io_step",
                                             "storage_backup_step"};
    os << "cache." << kNames[kind] << "() x" << k;
  }
};

struct Tick : Command {
  uint64_t dt;
  Tick() : dt(*rc::gen::element<uint64_t>(50, 400, 2000)) {}
  void run(const Model& m, System& sys) const override {
    sys.now() += dt;
    sys.check(m);
  }
  void show(std::ostream& os) const override { os << "now += " << dt; }
};

// The command mix of a property: each command kind as often as it is listed.
template <typename... Cmds>
struct Mix {
  static auto generator() { return rc::state::gen::execOneOfWithArgs<Cmds...>(); }
};

// Requests, locks, evictions, copies and the storage tier in everyday proportions.
using EverydayMix =
    Mix<Serve, Serve, Serve, Serve, Serve, Serve, Serve, Serve, Admit, Admit, Admit, Admit, Finish,
        Finish, Finish, Abort, Retract, Resume, Match, Lock, Unlock, Evict, Evict, Evict, Backup,
        LoadBack, LoadBack, StartLoads, Step, Step, Step, Poll, Poll, Drain, Drain, Prefetch,
        PrefetchNow, PrefetchProgress, PrefetchRelease, StorageStep, StorageStep, Tick>;
// The storage tier's paths more often: acks, backups to storage, prefetches.
using StorageMix =
    Mix<Serve, Serve, Serve, Serve, Serve, Serve, Serve, Serve, Serve, Serve, Admit, Admit, Finish,
        Finish, Abort, Retract, Resume, Match, Lock, Unlock, Evict, Evict, Evict, Backup, LoadBack,
        LoadBack, StartLoads, Step, Step, Poll, Poll, Poll, Drain, Drain, Drain, Prefetch,
        PrefetchNow, PrefetchNow, PrefetchNow, PrefetchNow, PrefetchProgress, PrefetchProgress,
        PrefetchRelease, StorageStep, StorageStep, StorageStep, StorageStep, Tick, Tick>;

template <typename CommandMix>
void run_property(const Config& config) {
  conformance::check_property(kBinary, [&config] {
    Model initial;
    initial.config = &config;
    System sys(config);
    // 1 to 50 commands (uniformly: RapidCheck draws the count from the size, fixed here).
    const auto commands =
        *rc::gen::resize(49, rc::state::gen::commands(initial, CommandMix::generator()));
    rc::state::runAll(commands, initial, sys);
    // Coverage of the rare paths, printed as a table after each property.
    const HiCacheStats& st = sys.cache().stats();
    RC_CLASSIFY(commands.size() >= 25, ">= 25 commands");
    RC_CLASSIFY(st.load_back_tokens > 0, "load-back");
    RC_CLASSIFY(st.evicted_device_tokens > 0, "device eviction");
    RC_CLASSIFY(st.evicted_host_tokens > 0, "host eviction");
    RC_CLASSIFY(st.prefetched_tokens > 0, "prefetch inserted");
    RC_CLASSIFY(st.prefetched_tokens == 0 && st.prefetch_revoked > 0, "prefetch revoked");
    RC_CLASSIFY(st.prefetch_shrunk > 0, "prefetch shrunk (seed 004)");
    RC_CLASSIFY(st.backed_up_pages > 0, "storage backup");
    RC_CLASSIFY(sys.resumed_with_cache() > 0, "resume served from cache");
    Model final_state = initial;
    rc::state::applyAll(commands, final_state);
    sys.quiesce_and_check(final_state);
  });
}

// Full attention, write-through, LRU, page 4, a storage tier (prefetch, backup to storage).
TEST(HiCacheStateful, WriteThroughWithStorage) {
  run_property<EverydayMix>(write_through_storage());
}

// Full attention, write-back (backup on eviction, flushing), LFU, page 2, no storage.
TEST(HiCacheStateful, WriteBackLfu) {
  run_property<EverydayMix>(write_back_lfu());
}

// A host pool smaller than the device pool and a small storage tier: host eviction on every
// backup, prefetches that hit storage, shrink to fit (seed 004) and wait for completion.
TEST(HiCacheStateful, StoragePressure) {
  run_property<StorageMix>(storage_pressure());
}

// Full + SWA (window 8, a small SWA pool) + Mamba (6 states), selective write-through,
// storage with best-effort prefetch.
TEST(HiCacheStateful, HybridSelectiveWithStorage) {
  run_property<EverydayMix>(hybrid_selective_storage());
}

}  // namespace
}  // namespace kvsim::property
