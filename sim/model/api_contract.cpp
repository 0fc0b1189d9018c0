#include "sim/model/api_contract.h"

#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/common/sanity.h"
#include "core/tree/mamba_component.h"
#include "core/tree/swa_component.h"

namespace kvsim::sim {
namespace {

using Problem = std::optional<std::string>;

// A tree of the run's shape: X = [a b] and Y = [a c] in namespace 0 (so `a` is an inner node
// with leaves `b` and `c`), Z = [d] in namespace 1; every value on device, auxiliary values on
// every node that a request computing it would leave (SWA: every token; Mamba: each leaf).
struct ApiTree {
  std::unique_ptr<RadixTree> tree;
  TreeNode* a = nullptr;
  TreeNode* b = nullptr;
  TreeNode* c = nullptr;
  TreeNode* d = nullptr;
};

std::vector<Token> api_tokens(std::initializer_list<Token> page_starts, int64_t page) {
  std::vector<Token> out;
  for (Token start : page_starts) {
    for (int64_t i = 0; i < page; ++i)
      out.push_back(start + static_cast<Token>(i));
  }
  return out;
}

IndexVector api_slots(Tier tier, SlotIndex first, size_t n) {
  std::vector<SlotIndex> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = first + static_cast<SlotIndex>(i);
  return IndexVector(tier, std::move(v));
}

ApiTree api_tree(const HiCacheOptions& shape) {
  ApiTree s;
  const int64_t page = shape.page_size;
  s.tree = std::make_unique<RadixTree>(
      RadixTreeOptions{.page_size = static_cast<int32_t>(page),
                       .eviction_policy = shape.eviction_policy,
                       .check_backup_contiguity = shape.write_policy != WritePolicy::kWriteBack});
  RadixTree& t = *s.tree;
  const bool swa = shape.has_swa();
  if (swa) t.add_component(std::make_unique<SwaComponent>(shape.swa_window_tokens));
  if (shape.has_mamba()) t.add_component(std::make_unique<MambaComponent>());
  const auto n = static_cast<size_t>(page);
  auto aux = [&](SlotIndex swa_first, size_t owned_from, SlotIndex state, size_t len) {
    AuxInsertValues v{.owned_from = owned_from};
    if (swa) {
      IndexVector slots = api_slots(Tier::kDevice, swa_first, len);
      std::vector<SlotIndex> e = slots.slots();
      std::fill(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(owned_from), SlotIndex{0});
      v.swa = IndexVector(Tier::kDevice, std::move(e));
    }
    if (shape.has_mamba()) v.mamba = state;
    return v;
  };
  t.insert(0, api_tokens({1, 1001}, page), api_slots(Tier::kDevice, 100, 2 * n),
           aux(5000, 0, 9000, 2 * n));
  const InsertResult y = t.insert(0, api_tokens({1, 2001}, page),
                                  api_slots(Tier::kDevice, 300, 2 * n), aux(6000, n, 9001, 2 * n));
  const InsertResult z = t.insert(1, api_tokens({3001}, page), api_slots(Tier::kDevice, 500, n),
                                  aux(7000, 0, 9002, n));
  s.c = y.last_node;
  s.a = s.c->parent;
  for (TreeNode* child : s.a->children.sorted()) {
    if (child != s.c) s.b = child;
  }
  s.d = z.last_node;
  return s;
}

int64_t id_of(const TreeNode* n) {
  return n != nullptr ? static_cast<int64_t>(n->id) : -1;
}

// What a root or aux call must leave as it was.
struct TreeState {
  std::vector<std::pair<const char*, int64_t>> fields;
};

TreeState state_of(const RadixTree& t) {
  TreeState s;
  const TreeNode& root = *t.root();
  s.fields = {{"the root's lock_ref", root.full().lock_ref},
              {"the root's host_lock_ref", root.full().host_lock_ref},
              {"evictable_size", t.evictable_size()},
              {"protected_size", t.protected_size()},
              {"node_count", static_cast<int64_t>(t.node_count())},
              {"next_device_victim", id_of(t.next_device_victim())},
              {"next_host_victim", id_of(t.next_host_victim())}};
  for (ComponentType type : {ComponentType::kSwa, ComponentType::kMamba}) {
    const bool swa = type == ComponentType::kSwa;
    s.fields.push_back(
        {swa ? "swa aux_evictable_size" : "mamba aux_evictable_size", t.aux_evictable_size(type)});
    s.fields.push_back(
        {swa ? "swa aux_protected_size" : "mamba aux_protected_size", t.aux_protected_size(type)});
    s.fields.push_back(
        {swa ? "swa next_aux_victim" : "mamba next_aux_victim", id_of(t.next_aux_victim(type))});
    s.fields.push_back({swa ? "the root's swa lock_ref" : "the root's mamba lock_ref",
                        root.component(type).lock_ref});
  }
  return s;
}

// "" when `after` equals `before`, else the first field that moved.
std::string moved(const TreeState& before, const TreeState& after) {
  for (size_t i = 0; i < before.fields.size(); ++i) {
    if (before.fields[i].second != after.fields[i].second) {
      return std::string(before.fields[i].first) + " went from " +
             std::to_string(before.fields[i].second) + " to " +
             std::to_string(after.fields[i].second);
    }
  }
  return "";
}

// nullopt when `call` returned; the failed assertion's message when the core refused it.
std::optional<std::string> refusal_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const AssertionFailure& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

Problem tree_sanity(const RadixTree& t, const char* after) {
  SanityReport report;
  t.sanity_check(report);
  if (report.ok()) return std::nullopt;
  return std::string("after ") + after + " the tree fails its sanity check: " + report.summary();
}

// The aux components `t` has, by type.
std::vector<ComponentType> aux_types(const RadixTree& t) {
  std::vector<ComponentType> out;
  for (ComponentType type : {ComponentType::kSwa, ComponentType::kMamba}) {
    if (t.has_component(type)) out.push_back(type);
  }
  return out;
}

// One call of a part: it must be refused (`refused`) or return, and leave `state` as it was
// (`same`); `extra` is what else the call's result must satisfy ("" when it does).
struct ApiCase {
  std::string what;
  std::function<void()> call;
  bool refused = false;
  bool same = true;
};

Problem run_case(RadixTree& t, const ApiCase& c, const char* refusal_needs = nullptr) {
  const TreeState before = state_of(t);
  const std::optional<std::string> refused = refusal_of(c.call);
  if (refused && !c.refused) return c.what + " was refused: " + *refused;
  if (!refused && c.refused) return c.what + " was accepted instead of refused";
  if (refused && refusal_needs != nullptr && refused->find(refusal_needs) == std::string::npos) {
    return c.what + " was refused for another reason than \"" + refusal_needs + "\": " + *refused;
  }
  if (c.same) {
    const std::string m = moved(before, state_of(t));
    if (!m.empty()) return c.what + ": " + m;
  }
  return std::nullopt;
}

}  // namespace

TreeCalls TreeCalls::core() {
  return TreeCalls{
      .inc_full = [](RadixTree& t, TreeNode& n) { t.inc_full_lock(n); },
      .dec_full = [](RadixTree& t, TreeNode& n) { t.dec_full_lock(n); },
      .lock = [](RadixTree& t, TreeNode& n) { return t.lock(n); },
      .unlock = [](RadixTree& t, const LockRecord& r) { t.unlock(r); },
      .set_aux = [](RadixTree& t, TreeNode& n, ComponentType type,
                    IndexVector v) { t.set_aux_value(n, type, std::move(v)); },
      .take_aux = [](RadixTree& t, TreeNode& n,
                     ComponentType type) { return t.take_aux_value(n, type); },
      .set_aux_host = [](RadixTree& t, TreeNode& n, ComponentType type,
                         IndexVector v) { t.set_aux_host_value(n, type, std::move(v)); },
      .next_aux_victim = [](const RadixTree& t,
                            ComponentType type) { return t.next_aux_victim(type); },
      .inc_aux = [](RadixTree& t, TreeNode& n, ComponentType type) { t.inc_aux_lock(n, type); },
      .dec_aux = [](RadixTree& t, TreeNode& n, ComponentType type) { t.dec_aux_lock(n, type); },
  };
}

Problem root_locks_problem(const HiCacheOptions& shape, const TreeCalls& calls) {
  ScopedThrowingAsserts asserts;
  ApiTree s = api_tree(shape);
  RadixTree& t = *s.tree;
  TreeNode& root = *t.root();
  const LockRecord held = calls.lock(t, *s.c);  // held throughout: the sizes are not all 0
  std::string record_problem;
  std::vector<ApiCase> cases = {
      {"dec_full_lock(root)", [&] { calls.dec_full(t, root); }},
      {"inc_full_lock(root)", [&] { calls.inc_full(t, root); }},
      {"inc_full_lock(root) then dec_full_lock(root)",
       [&] {
         calls.inc_full(t, root);
         calls.dec_full(t, root);
       }},
      {"lock(root) then unlock",
       [&] {
         const LockRecord r = calls.lock(t, root);
         if (r.anchor != 0 || std::any_of(r.start.begin(), r.start.end(),
                                          [](const auto& st) { return st.has_value(); })) {
           record_problem = "lock(root) recorded anchor " + std::to_string(r.anchor) +
                            " with a component start (the root protects nothing)";
         }
         calls.unlock(t, r);
       }},
      {"lock(leaf " + std::to_string(s.b->id) + ") then unlock",
       [&] { calls.unlock(t, calls.lock(t, *s.b)); }},
  };
  for (ComponentType type : aux_types(t)) {
    const std::string name(to_string(type));
    cases.push_back({"inc_aux_lock(root, " + name + ")",
                     [&, type] { calls.inc_aux(t, root, type); }, /*refused=*/true});
    cases.push_back({"dec_aux_lock(root, " + name + ")",
                     [&, type] { calls.dec_aux(t, root, type); }, /*refused=*/true});
  }
  for (const ApiCase& c : cases) {
    if (Problem p = run_case(t, c)) return p;
    if (!record_problem.empty()) return record_problem;
  }
  calls.unlock(t, held);
  return tree_sanity(t, "the root's lock calls");
}

Problem aux_calls_problem(const HiCacheOptions& shape, const TreeCalls& calls) {
  ScopedThrowingAsserts asserts;
  ApiTree s = api_tree(shape);
  RadixTree& t = *s.tree;
  TreeNode& root = *t.root();
  const auto page = static_cast<size_t>(shape.page_size);
  t.set_host_value(*s.a, api_slots(Tier::kHost, 100, page));  // `a` backed up, `b` not
  // The full-attention type is refused by name by every auxiliary call, on a backed-up node and
  // on one that is not, and nothing changes (the node's own full data included).
  constexpr ComponentType kFull = ComponentType::kFull;
  for (TreeNode* n : {s.a, s.b}) {
    const std::string at = "(node " + std::to_string(n->id) + ", full)";
    const ComponentData full_before = n->full();
    const std::vector<ApiCase> cases = {
        {"set_aux_value" + at,
         [&] { calls.set_aux(t, *n, kFull, api_slots(Tier::kDevice, 800, page)); }, true},
        {"take_aux_value" + at, [&] { calls.take_aux(t, *n, kFull); }, true},
        {"set_aux_host_value" + at,
         [&] { calls.set_aux_host(t, *n, kFull, api_slots(Tier::kHost, 800, page)); }, true},
        {"next_aux_victim(full)", [&] { calls.next_aux_victim(t, kFull); }, true},
        {"inc_aux_lock" + at, [&] { calls.inc_aux(t, *n, kFull); }, true},
        {"dec_aux_lock" + at, [&] { calls.dec_aux(t, *n, kFull); }, true},
    };
    for (const ApiCase& c : cases) {
      if (Problem p = run_case(t, c, "not an auxiliary component")) return p;
      const ComponentData& now = n->full();
      if (now.value != full_before.value || now.host_value != full_before.host_value ||
          now.lock_ref != full_before.lock_ref || now.host_lock_ref != full_before.host_lock_ref) {
        return c.what + " changed the node's full-attention data";
      }
    }
  }
  // Each auxiliary component: its misuse refused, its accepted calls moving what they promise.
  for (ComponentType type : aux_types(t)) {
    const std::string name(to_string(type));
    const size_t len = type == ComponentType::kSwa ? page : 1;
    TreeNode& leaf = *s.b;
    const std::string at = "(node " + std::to_string(leaf.id) + ", " + name + ")";
    const IndexVector value = *leaf.component(type).value;
    const auto n = static_cast<int64_t>(value.size());
    const IndexVector host = api_slots(Tier::kHost, 700, len);
    auto sizes = [&] { return std::pair{t.aux_evictable_size(type), t.aux_protected_size(type)}; };
    auto expect = [&](const std::string& what, bool ok, std::pair<int64_t, int64_t> want) {
      const auto got = sizes();
      if (ok && got == want) return Problem();
      return Problem(what + " left " + name + " evictable/protected " + std::to_string(got.first) +
                     "/" + std::to_string(got.second) + ", not " + std::to_string(want.first) +
                     "/" + std::to_string(want.second) + (ok ? "" : ", or its result is wrong"));
    };
    // The least recently used node holding an unlocked value, recomputed.
    auto victim_problem = [&](const std::string& after) {
      const TreeNode* want = nullptr;
      t.for_each_node([&](const TreeNode& m) {
        const ComponentData& d = m.component(type);
        if (m.is_root() || !d.value || d.lock_ref > 0) return;
        if (want == nullptr ||
            std::pair(m.last_access, m.id) < std::pair(want->last_access, want->id))
          want = &m;
      });
      const TreeNode* got = calls.next_aux_victim(t, type);
      if (got == want) return Problem();
      return Problem("after " + after + " next_aux_victim(" + name + ") is node " +
                     std::to_string(id_of(got)) + ", not node " + std::to_string(id_of(want)));
    };
    const std::pair<int64_t, int64_t> start = sizes();
    const std::vector<ApiCase> refused = {
        {"set_aux_value(root, " + name + ")",
         [&] { calls.set_aux(t, root, type, api_slots(Tier::kDevice, 800, len)); }, true},
        {"set_aux_host_value(root, " + name + ")", [&] { calls.set_aux_host(t, root, type, host); },
         true},
        {"set_aux_host_value" + at + " without a full host value",
         [&] { calls.set_aux_host(t, leaf, type, host); }, true},
        {"set_aux_value" + at + " on a node that has one",
         [&] { calls.set_aux(t, leaf, type, api_slots(Tier::kDevice, 800, len)); }, true},
        {"dec_aux_lock" + at + " at zero", [&] { calls.dec_aux(t, leaf, type); }, true},
    };
    for (const ApiCase& c : refused) {
      if (Problem p = run_case(t, c)) return p;
    }
    if (Problem p = victim_problem("the refused calls")) return p;
    // A host value: accepted once on a backed-up node, refused the second time.
    if (Problem p =
            run_case(t, {"set_aux_host_value(node " + std::to_string(s.a->id) + ", " + name + ")",
                         [&] { calls.set_aux_host(t, *s.a, type, host); }})) {
      return p;
    }
    if (s.a->component(type).host_value != host) {
      return "set_aux_host_value(" + name + ") did not store the host value";
    }
    if (Problem p = run_case(
            t, {"a second set_aux_host_value(node " + std::to_string(s.a->id) + ", " + name + ")",
                [&] { calls.set_aux_host(t, *s.a, type, host); }, true})) {
      return p;
    }
    // Lock, then the locked value cannot be taken; unlock; take, then the tombstone cannot be
    // taken, locked or unlocked; revive.
    if (auto p = refusal_of([&] { calls.inc_aux(t, leaf, type); }))
      return "inc_aux_lock" + at + ": " + *p;
    if (Problem p = expect("inc_aux_lock" + at, true, {start.first - n, start.second + n}))
      return p;
    if (Problem p = victim_problem("inc_aux_lock" + at)) return p;
    if (Problem p = run_case(t, {"take_aux_value" + at + " of a locked value",
                                 [&] { calls.take_aux(t, leaf, type); }, true})) {
      return p;
    }
    if (auto p = refusal_of([&] { calls.dec_aux(t, leaf, type); }))
      return "dec_aux_lock" + at + ": " + *p;
    if (Problem p = expect("dec_aux_lock" + at, true, start)) return p;
    IndexVector taken;
    if (auto p = refusal_of([&] { taken = calls.take_aux(t, leaf, type); })) {
      return "take_aux_value" + at + ": " + *p;
    }
    if (Problem p =
            expect("take_aux_value" + at, taken == value && !leaf.component(type).value.has_value(),
                   {start.first - n, start.second})) {
      return p;
    }
    if (Problem p = victim_problem("take_aux_value" + at)) return p;
    for (const ApiCase& c : std::vector<ApiCase>{
             {"take_aux_value" + at + " of a tombstone", [&] { calls.take_aux(t, leaf, type); },
              true},
             {"inc_aux_lock" + at + " of a tombstone", [&] { calls.inc_aux(t, leaf, type); }, true},
             {"dec_aux_lock" + at + " of a tombstone", [&] { calls.dec_aux(t, leaf, type); }, true},
         }) {
      if (Problem p = run_case(t, c)) return p;
    }
    if (auto p = refusal_of([&] { calls.set_aux(t, leaf, type, value); })) {
      return "set_aux_value" + at + " reviving its tombstone: " + *p;
    }
    if (Problem p = expect("set_aux_value" + at + " reviving its tombstone",
                           leaf.component(type).value == value, start)) {
      return p;
    }
    if (Problem p = victim_problem("set_aux_value" + at)) return p;
  }
  return tree_sanity(t, "the auxiliary calls");
}

Problem held_locks_contract_problem(const HiCacheOptions& shape, HeldLocksFn problem) {
  ScopedThrowingAsserts asserts;
  ApiTree s = api_tree(shape);
  RadixTree& t = *s.tree;
  // Every node on a held lock's path: each leaf locked, one twice, and the root (no start).
  std::vector<HeldLock> held;
  for (TreeNode* n : {s.b, s.c, s.c, s.d, t.root()}) {
    const LockRecord r = t.lock(*n);
    held.push_back(HeldLock{r.anchor, r.start[index_of(ComponentType::kFull)]});
  }
  TreeSnapshot snap = t.snapshot();
  snap.held_locks = held;
  if (const std::string p = problem(snap); !p.empty()) {
    return "a snapshot with its held locks recorded: " + p;
  }
  TreeSnapshot none = snap;
  none.held_locks.reset();
  if (const std::string p = problem(none); !p.empty()) {
    return "a snapshot without held locks recorded: " + p;
  }
  TreeSnapshot root_lock_dropped = snap;
  root_lock_dropped.held_locks->pop_back();  // the root's lock protects nothing
  if (const std::string p = problem(root_lock_dropped); !p.empty()) {
    return "a snapshot missing the root's held lock (which protects nothing): " + p;
  }
  TreeSnapshot leaf_lock_dropped = snap;
  leaf_lock_dropped.held_locks->erase(leaf_lock_dropped.held_locks->begin());
  if (problem(leaf_lock_dropped).rfind("node ", 0) != 0) {
    return "a snapshot missing the held lock of leaf " + std::to_string(s.b->id) +
           " was not refused by node: \"" + problem(leaf_lock_dropped) + "\"";
  }
  for (size_t i = 0; i < snap.nodes.size(); ++i) {
    for (int32_t delta : {1, -1}) {
      TreeSnapshot off = snap;
      off.nodes[i].lock_ref += delta;
      const std::string want = "node " + std::to_string(off.nodes[i].id) + ": field lock_ref";
      const std::string got = problem(off);
      if (got.rfind(want, 0) != 0) {
        return "node " + std::to_string(off.nodes[i].id) + "'s lock_ref " +
               std::to_string(off.nodes[i].lock_ref) + " (held locks give " +
               std::to_string(snap.nodes[i].lock_ref) + ") was reported as \"" + got + "\"";
      }
    }
  }
  return std::nullopt;
}

Problem decode_admit_problem(const HiCacheOptions& shape, DecodeAdmitFn admit) {
  ScopedThrowingAsserts asserts;
  const int64_t page = shape.page_size;
  HiCacheOptions o = shape;
  o.device_tokens = o.host_tokens = 4 * page;
  o.swa_device_tokens = shape.swa_device_tokens > 0 ? 4 * page : 0;
  o.swa_host_tokens = shape.swa_host_tokens > 0 ? 4 * page : 0;
  if (o.has_mamba()) {
    o.mamba_device_states = 3;
    o.mamba_host_states = shape.mamba_host_states > 0 ? 6 : 0;
  }
  CpuBackend backend;
  HiCache cache(backend, o);
  const std::vector<Token> tokens = api_tokens({1, 1001}, page);
  const auto n = static_cast<size_t>(2 * page);
  // The prompt cached by a finished request: a prefix cache would match all of it.
  RequestKV first(cache, 0);
  if (!first.admit(tokens) || !first.extend(n)) {
    if (first.active()) first.detach();
    return std::string("a first request, with the prefix cache, ran short of slots");
  }
  const std::vector<SlotIndex>& kv_slots = first.kv().slots();
  const std::set<SlotIndex> tree_slots(kv_slots.begin(), kv_slots.end());
  std::set<SlotIndex> tree_swa;
  if (first.swa()) tree_swa.insert(first.swa()->slots().begin(), first.swa()->slots().end());
  const std::optional<SlotIndex> tree_state = first.mamba_state();
  first.finish(tokens);
  const RadixTree& tree = cache.tree();
  const SidePool* swa = cache.side_pool(ComponentType::kSwa);
  const SidePool* mamba = cache.side_pool(ComponentType::kMamba);
  auto free_slots = [&] {
    return std::array<int64_t, 3>{cache.available_device_size(),
                                  swa ? swa->device_slots().available_size() : 0,
                                  mamba ? mamba->device_slots().available_size() : 0};
  };
  const auto free_before = free_slots();
  const int64_t protected_before = tree.protected_size();
  const size_t nodes_before = tree.node_count();

  RequestKV kv(cache, 0);
  auto fail = [&](const std::string& what) {
    if (kv.active()) kv.detach();  // the cache is dropped with the request's slots
    return Problem("admit without the prefix cache: " + what);
  };
  std::optional<AdmitOutcome> out;
  if (auto p =
          refusal_of([&] { out = admit ? admit(kv, tokens) : kv.admit(tokens, false, false); })) {
    return fail("failed an assertion: " + *p);
  }
  if (!out) return fail("was refused (nullopt)");
  if (out->device_hit_tokens != 0 || out->host_hit_tokens != 0 || out->mamba_hit ||
      kv.kv().size() != 0 || kv.owned_from() != 0) {
    return fail("matched the cached prompt: device hit " + std::to_string(out->device_hit_tokens) +
                ", host hit " + std::to_string(out->host_hit_tokens) + ", " +
                std::to_string(kv.kv().size()) + " slot(s) held, owned from " +
                std::to_string(kv.owned_from()));
  }
  if (kv.swa().has_value() != (swa != nullptr) || (kv.swa() && kv.swa()->size() != 0)) {
    return fail(std::string("the request's SWA slots are ") +
                (kv.swa() ? std::to_string(kv.swa()->size()) + " slot(s)" : "absent") +
                (swa ? " on an SWA cache (an empty vector)" : " on a cache without SWA"));
  }
  if (kv.mamba_state().has_value() != (mamba != nullptr) ||
      (kv.mamba_state() && kv.mamba_state() == tree_state)) {
    return fail("the request's Mamba state is not a fresh slot of its own");
  }
  if (tree.protected_size() != protected_before || tree.node_count() != nodes_before) {
    return fail("it locked or changed the tree (protected " + std::to_string(protected_before) +
                " -> " + std::to_string(tree.protected_size()) + ")");
  }
  bool extended = false;
  if (auto p = refusal_of([&] { extended = kv.extend(n); })) {
    return fail("extend failed an assertion: " + *p);
  }
  if (!extended || kv.kv().size() != n) return fail("extend did not give it the prompt's slots");
  for (SlotIndex v : kv.kv().slots()) {
    if (tree_slots.count(v) != 0)
      return fail("its device slot " + std::to_string(v) + " is the tree's");
  }
  if (swa) {
    if (!kv.swa() || kv.swa()->size() != n) return fail("extend left the SWA slots short");
    for (SlotIndex v : kv.swa()->slots()) {
      if (v == 0 || tree_swa.count(v) != 0) {
        return fail("its SWA slot " + std::to_string(v) + " is not a fresh one of its own");
      }
    }
  }
  if (auto p = refusal_of([&] { kv.abort(); })) return fail("abort failed an assertion: " + *p);
  if (free_slots() != free_before) return fail("abort did not give back every slot");
  SanityReport report;
  cache.sanity_check(report);
  if (!report.ok()) return fail("the cache fails its sanity check: " + report.summary());
  return std::nullopt;
}

std::optional<std::string> check_api_contract(const HiCacheOptions& options) {
  const probes::Uncounted own_calls;  // the contract's own calls are not the run's coverage
  ScopedThrowingAsserts asserts;
  try {
    if (Problem p = root_locks_problem(options)) return "root locks: " + *p;
    if (Problem p = aux_calls_problem(options)) return "auxiliary calls: " + *p;
    if (Problem p = held_locks_contract_problem(options)) return "held_locks_problem: " + *p;
    if (Problem p = decode_admit_problem(options)) return "RequestKV: " + *p;
  } catch (const std::exception& e) {
    return std::string("a call of the API contract raised: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace kvsim::sim
