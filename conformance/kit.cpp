#include "conformance/kit.h"

#include "conformance/oracle_io.h"
#include "core/cache/request_kv.h"
#include "core/common/assert.h"

namespace kvsim::conformance {
namespace {

constexpr int32_t kPage = 4;
constexpr int64_t kAll = int64_t{1} << 40;

HiCacheOptions base_options(KitGeometry geometry) {
  const bool roomy = geometry == KitGeometry::kRoomy;
  return HiCacheOptions{.page_size = kPage,
                        .layer_count = 2,
                        .item_bytes = 16,
                        .device_tokens = roomy ? 1024 : 48,
                        .host_tokens = roomy ? 2048 : 96,
                        .write_policy = WritePolicy::kWriteThrough,
                        .load_back_threshold_tokens = 1};
}

class HiCacheSubject final : public KitSubject {
 public:
  explicit HiCacheSubject(const HiCacheOptions& options) : cache_(backend_, options) {}

  RadixTree& tree() override { return cache_.tree(); }
  int32_t page_size() const override { return cache_.options().page_size; }

  void serve(Namespace ns, std::span<const Token> tokens) override {
    cache_.check_hicache_events();  // the scheduler's poll point
    auto req = std::make_unique<RequestKV>(cache_, ns);
    try {
      serve(*req, tokens);
    } catch (...) {
      // A core assertion fired mid-request: keep the RequestKV alive (its destructor asserts
      // that it holds nothing) so that the original failure is what gets reported.
      if (req->active()) static_cast<void>(req.release());
      throw;
    }
  }
  int64_t backup(TreeNode& node) override { return cache_.write_backup(node); }
  int64_t evict_device(int64_t tokens) override { return cache_.evict(tokens); }
  int64_t evict_component(ComponentType type, int64_t slots) override {
    if (type == ComponentType::kSwa) return cache_.evict_swa(slots);
    if (type == ComponentType::kMamba) return cache_.evict_mamba(slots);
    return 0;
  }
  int64_t evict_host(int64_t tokens) override { return cache_.evict_host(tokens); }
  bool load_back(TreeNode& best_match_node) override {
    const LoadBackResult lb = cache_.init_load_back(best_match_node);
    // The scheduler's protocol: the compute stream waits for the load before the next forward
    // (or Mamba copy-on-write) reads what it brings; the CPU backend reports a read that is not
    // ordered after its load (stream_ordering).
    if (lb.loaded) cache_.wait_for_load(cache_.ready_to_load_host_cache());
    return lb.loaded;
  }
  void settle() override { cache_.flush(); }
  void sanity(SanityReport& report) const override { cache_.sanity_check(report); }

  void serve(RequestKV& req, std::span<const Token> tokens) {
    if (!req.admit(tokens)) return;  // no Mamba state slot
    bool grown = req.extend(tokens.size());
    if (!grown) {  // in-flight write-throughs pin their nodes: wait for them, then retry
      cache_.flush();
      grown = req.extend(tokens.size());
    }
    if (!grown) {
      req.abort();
      return;
    }
    forward(cache_, req, tokens, req.owned_from());
    req.finish(tokens);
  }
  std::optional<std::string> values_error(const TreeNode& node, ComponentType type) override {
    return node_values_error(cache_, node, type);
  }
  TransferContext transfer_context(ComponentType type) override {
    if (type == ComponentType::kFull) return {&cache_.controller(), std::nullopt};
    return {&cache_.controller(), cache_.side_pool(type)->name()};
  }
  std::optional<std::string> leak_error() override {
    const auto full = [](const PagedSlotAllocator& a) {
      return a.available_size() == a.capacity();
    };
    if (!full(cache_.device_slots())) return "device slots leaked";
    if (!full(cache_.host_slots())) return "host slots leaked";
    for (const ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
      const SidePool* pool = cache_.side_pool(t);
      if (pool == nullptr) continue;
      if (!full(pool->device_slots()) || !full(pool->host_slots())) {
        return std::string(to_string(t)) + " slots leaked";
      }
    }
    return std::nullopt;
  }

 private:
  CpuBackend backend_;
  HiCache cache_;
};

class ExampleSubject final : public KitSubject {
 public:
  explicit ExampleSubject(const ExampleCacheOptions& options)
      : cache_(options),
        // Only for transfer resolution: a controller in which the checksum pool is registered
        // as a side pool (under the one PoolName no component of this tree uses).
        kv_device_(backend_, cache_.device_slots().slot_count(), 1, 8),
        kv_host_(backend_, cache_.host_slots().slot_count(), 1, 8, KVLayout::kLayerFirst),
        ck_device_(backend_, cache_.checksums().device_slots().slot_count(), 1, 8),
        ck_host_(backend_, cache_.checksums().host_slots().slot_count(), 1, 8,
                 KVLayout::kLayerFirst),
        controller_(backend_, kv_device_, cache_.device_slots(), kv_host_, cache_.host_slots(),
                    CacheControllerOptions{.page_size = options.page_size}) {
    controller_.add_side_pool(PoolName::kIndexer, ck_device_, ck_host_);
  }

  RadixTree& tree() override { return cache_.tree(); }
  int32_t page_size() const override { return cache_.options().page_size; }
  void serve(Namespace ns, std::span<const Token> tokens) override { cache_.serve(ns, tokens); }
  int64_t backup(TreeNode& node) override { return cache_.backup(node); }
  int64_t evict_device(int64_t tokens) override { return cache_.evict(tokens); }
  int64_t evict_component(ComponentType type, int64_t slots) override {
    return type == cache_.slot() ? cache_.evict_checksums(slots) : 0;
  }
  int64_t evict_host(int64_t tokens) override { return cache_.evict_host(tokens); }
  bool load_back(TreeNode& best_match_node) override { return cache_.load_back(best_match_node); }
  void settle() override { backend_.synchronize(); }  // the example's copies are synchronous
  void sanity(SanityReport& report) const override {
    cache_.sanity_check(report);
    for (const BackendViolation& v : backend_.violations())
      report.add("stream_lifetime", v.kind + ": " + v.detail);
  }
  std::optional<std::string> values_error(const TreeNode& node, ComponentType type) override {
    return cache_.values_error(node, type);
  }
  TransferContext transfer_context(ComponentType type) override {
    if (type == ComponentType::kFull) return {&controller_, std::nullopt};
    return {&controller_, PoolName::kIndexer};
  }
  std::optional<std::string> leak_error() override { return cache_.leak_error(); }

 private:
  ExampleCache cache_;
  CpuBackend backend_;
  DeviceKVPool kv_device_;
  HostKVPool kv_host_;
  DeviceKVPool ck_device_;
  HostKVPool ck_host_;
  CacheController controller_;
};

std::vector<const TreeNode*> anchor_only(const TreeNode& anchor) {
  if (anchor.is_root()) return {};
  return {&anchor};
}

}  // namespace

std::vector<const TreeNode*> evicted_chain(const TreeNode& anchor) {
  std::vector<const TreeNode*> out;
  for (const TreeNode* n = &anchor; !n->is_root() && n->evicted(); n = n->parent)
    out.push_back(n);
  return out;
}

std::unique_ptr<KitSubject> hicache_subject(KitGeometry geometry,
                                            const std::function<void(HiCacheOptions&)>& enable) {
  HiCacheOptions options = base_options(geometry);
  if (enable) enable(options);
  return std::make_unique<HiCacheSubject>(options);
}

std::unique_ptr<KitSubject> example_subject(KitGeometry geometry) {
  const bool roomy = geometry == KitGeometry::kRoomy;
  return std::make_unique<ExampleSubject>(
      ExampleCacheOptions{.page_size = kPage,
                          .device_tokens = roomy ? 1024 : 48,
                          .host_tokens = roomy ? 2048 : 96,
                          .checksum_device_slots = roomy ? 256 : 8,
                          .checksum_host_slots = roomy ? 512 : 20});
}

ComponentUnderTest full_component_under_test() {
  return ComponentUnderTest{.name = "Full",
                            .type = ComponentType::kFull,
                            .make = [](KitGeometry g) { return hicache_subject(g, nullptr); },
                            .load_back_reads = evicted_chain};
}

ComponentUnderTest swa_component_under_test() {
  constexpr int64_t kWindow = 8;
  return ComponentUnderTest{
      .name = "Swa",
      .type = ComponentType::kSwa,
      .make =
          [](KitGeometry g) {
            return hicache_subject(g, [g](HiCacheOptions& o) {
              o.swa_window_tokens = kWindow;
              o.swa_device_tokens = g == KitGeometry::kRoomy ? 1024 : 24;
            });
          },
      // The window ending at the anchor, never past its reset point (seed 002).
      .load_back_reads =
          [](const TreeNode& anchor) {
            std::vector<const TreeNode*> out;
            int64_t covered = 0;
            for (const TreeNode* n = &anchor; !n->is_root() && covered < kWindow; n = n->parent) {
              out.push_back(n);
              covered += n->token_count();
            }
            return out;
          }};
}

ComponentUnderTest mamba_component_under_test() {
  return ComponentUnderTest{.name = "Mamba",
                            .type = ComponentType::kMamba,
                            .make =
                                [](KitGeometry g) {
                                  return hicache_subject(g, [g](HiCacheOptions& o) {
                                    o.mamba_device_states = g == KitGeometry::kRoomy ? 256 : 6;
                                    o.mamba_state_bytes = 32;
                                  });
                                },
                            .load_back_reads = anchor_only};
}

ComponentUnderTest example_component_under_test() {
  return ComponentUnderTest{.name = "Example",
                            .type = kExampleSlot,
                            .make = example_subject,
                            .load_back_reads = anchor_only};
}

void showValue(const KitOp& op, std::ostream& os) {
  switch (op.kind) {
    case KitOp::kServe:
      os << "serve(" << show(op.shape) << ")";
      return;
    case KitOp::kMatch:
      os << "match_prefix(" << show(op.shape) << ")";
      return;
    case KitOp::kBackup:
      os << "backup(node " << op.n << " of match(" << show(op.shape) << "))";
      return;
    case KitOp::kEvictDevice:
      os << "evict_device(" << op.n << " pages)";
      return;
    case KitOp::kEvictComponent:
      os << "evict_component(" << op.n << " slots)";
      return;
    case KitOp::kEvictHost:
      os << "evict_host(" << op.n << " pages)";
      return;
    case KitOp::kLoadBack:
      os << "load_back(match(" << show(op.shape) << ").best_match_node)";
      return;
    case KitOp::kSettle:
      os << "settle()";
      return;
    case KitOp::kLock:
      os << "lock(match(" << show(op.shape) << ")."
         << (op.n % 2 == 0 ? "last_device_node" : "best_match_node") << ")";
      return;
    case KitOp::kUnlock:
      os << "unlock(held[" << op.n << " % held])";
      return;
  }
}

rc::Gen<std::vector<KitOp>> gen_ops(OpMix mix, int max_ops, int32_t page_size) {
  // Each kind repeated by its weight.
  std::vector<KitOp::Kind> kinds;
  const auto add = [&](KitOp::Kind k, int weight) { kinds.insert(kinds.end(), weight, k); };
  add(KitOp::kServe, 8);
  add(KitOp::kMatch, 2);
  add(KitOp::kBackup, 3);
  add(KitOp::kLoadBack, 3);
  add(KitOp::kSettle, 2);
  if (mix.evictions) {
    add(KitOp::kEvictDevice, 3);
    add(KitOp::kEvictComponent, 3);
    add(KitOp::kEvictHost, 2);
  }
  if (mix.locks) {
    add(KitOp::kLock, 2);
    add(KitOp::kUnlock, 2);
  }
  const double scale = static_cast<double>(max_ops) / 100.0;
  return rc::gen::exec([=] {
    // A few "documents" per case: most operations use one of them (or a prefix of one), so
    // serves, matches, locks and load-backs keep meeting the same paths.
    const auto docs = *rc::gen::resize(
        4, rc::gen::nonEmpty(rc::gen::container<std::vector<Shape>>(gen_shape(6, page_size, 2))));
    const rc::Gen<KitOp> op = rc::gen::resize(
        rc::kNominalSize, rc::gen::exec([=] {
          KitOp o;
          o.kind = *rc::gen::elementOf(kinds);
          const int mode = *rc::gen::weightedElement<int>({{5, 0}, {3, 1}, {2, 2}});
          if (mode == 2) {
            o.shape = *gen_shape(6, page_size, 2);
          } else {
            o.shape = *rc::gen::elementOf(docs);
            if (mode == 1) {
              o.shape.branches.resize(*rc::gen::inRange<size_t>(1, o.shape.branches.size() + 1));
              o.shape.tail = 0;
            }
          }
          o.n = *rc::gen::inRange<uint32_t>(0, 12);
          return o;
        }));
    return *rc::gen::scale(scale, rc::gen::container<std::vector<KitOp>>(op));
  });
}

void OpRunner::run(const KitOp& op) {
  RadixTree& tree = subject_.tree();
  const std::vector<Token> tokens = tokens_of(op.shape, subject_.page_size());
  const auto page = static_cast<int64_t>(subject_.page_size());
  switch (op.kind) {
    case KitOp::kServe:
      subject_.serve(op.shape.ns, tokens);
      return;
    case KitOp::kMatch:
      tree.match_prefix(op.shape.ns, tokens);
      return;
    case KitOp::kBackup: {
      const MatchResult m = tree.match_prefix(op.shape.ns, tokens);
      const std::vector<TreeNode*> path = RadixTree::path_to(*m.last_device_node);
      if (path.empty()) return;
      TreeNode* node = path[op.n % path.size()];
      if (!node->evicted() && !node->backed_up()) subject_.backup(*node);
      return;
    }
    case KitOp::kEvictDevice:
      subject_.evict_device(op.n * page);
      return;
    case KitOp::kEvictComponent:
      subject_.evict_component(type_, op.n);
      return;
    case KitOp::kEvictHost:
      subject_.evict_host(op.n * page);
      return;
    case KitOp::kLoadBack: {
      const MatchResult m = tree.match_prefix(op.shape.ns, tokens);
      if (m.best_match_node == m.last_device_node) return;
      if (before_load_back) before_load_back(*m.best_match_node);
      const bool loaded = subject_.load_back(*m.best_match_node);
      if (after_load_back) after_load_back(*m.best_match_node, loaded);
      return;
    }
    case KitOp::kSettle:
      subject_.settle();
      return;
    case KitOp::kLock: {
      const MatchResult m = tree.match_prefix(op.shape.ns, tokens);
      TreeNode* anchor = op.n % 2 == 0 ? m.last_device_node : m.best_match_node;
      if (before_lock) before_lock();
      held_.push_back(tree.lock(*anchor));
      if (on_lock) on_lock(held_.back());
      return;
    }
    case KitOp::kUnlock: {
      if (held_.empty()) return;
      const size_t i = op.n % held_.size();
      if (on_unlock) on_unlock(held_[i]);
      tree.unlock(held_[i]);
      held_.erase(held_.begin() + static_cast<ptrdiff_t>(i));
      return;
    }
  }
}

void OpRunner::unlock_all() {
  while (!held_.empty()) {
    if (on_unlock) on_unlock(held_.back());
    subject_.tree().unlock(held_.back());
    held_.pop_back();
  }
}

void evict_everything(KitSubject& subject) {
  subject.settle();
  for (int round = 0; round < 64; ++round) {
    const int64_t freed = subject.evict_device(kAll) + subject.evict_host(kAll);
    if (freed == 0) break;
  }
}

}  // namespace kvsim::conformance
