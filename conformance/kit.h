// The component conformance kit: what the parameterised suite (component_kit_test.cpp) needs
// to drive any TreeComponent — the ComponentUnderTest descriptor, the KitSubject a descriptor
// builds (a tree hosting the component, plus whatever allocates, copies and checks its
// values), and the random operations the properties run. docs/new-component.md explains how
// to add a component to the kit.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "conformance/example_cache.h"
#include "conformance/shape.h"
#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/tiers/cache_controller.h"
#include "core/tree/radix_tree.h"

namespace kvsim::conformance {

// Pool sizes: kTight makes every eviction path run; kRoomy never evicts unless told to (the
// lock-symmetry property runs twin subjects that must evict identically).
enum class KitGeometry { kTight, kRoomy };

// Where the values of one component move through a CacheController (transfer resolution).
struct TransferContext {
  CacheController* controller = nullptr;
  std::optional<PoolName> pool;  // nullopt: the main KV pool (CacheController::move_indices)
};

// A tree hosting the component under test, and the driver around it.
class KitSubject {
 public:
  virtual ~KitSubject() = default;
  virtual RadixTree& tree() = 0;
  virtual int32_t page_size() const = 0;
  // A request end to end: match, lock, compute the rest, insert (the component's values
  // included), free duplicates, unlock. May give up when pools are full.
  virtual void serve(Namespace ns, std::span<const Token> tokens) = 0;
  // Host backup of one node; returns tokens backed up (0 when refused).
  virtual int64_t backup(TreeNode& node) = 0;
  virtual int64_t evict_device(int64_t tokens) = 0;
  // Tombstones values of an auxiliary component (0 for kFull); may evict device leaves.
  virtual int64_t evict_component(ComponentType type, int64_t slots) = 0;
  virtual int64_t evict_host(int64_t tokens) = 0;
  // Load-back anchored at `best_match_node`; true when something was loaded. A walk into a
  // node with neither device nor host value is a KV_ASSERT (AssertionFailure).
  virtual bool load_back(TreeNode& best_match_node) = 0;
  // Completes every pending copy and consumes its acknowledgement.
  virtual void settle() = 0;
  // Every invariant the host can check (tree + pools + ownership).
  virtual void sanity(SanityReport& report) const = 0;
  // Error text when `node`'s values of `type` (device and host) differ from the oracle.
  virtual std::optional<std::string> values_error(const TreeNode& node, ComponentType type) = 0;
  virtual TransferContext transfer_context(ComponentType type) = 0;
  // Error text when any pool still has an allocated slot (call after evicting everything).
  virtual std::optional<std::string> leak_error() = 0;
  // Every component type the subject's tree has (kFull first).
  std::vector<ComponentType> types() {
    std::vector<ComponentType> out;
    for (const auto& c : tree().components())
      out.push_back(c->type());
    return out;
  }
};

// The descriptor a component supplies to the kit.
struct ComponentUnderTest {
  std::string name;    // the instantiation's name: "Full", "Swa", "Mamba", "Example"
  ComponentType type;  // the slot its values live in
  // Builds a fresh subject: a HiCache with the component enabled (see hicache_subject) or,
  // for a component HiCache cannot host, a tree-level host (see example_subject).
  std::function<std::unique_ptr<KitSubject>(KitGeometry)> make;
  // The nodes whose values of this component a load-back anchored at `anchor` reads (each
  // must hold a device or host value: seed 002).
  std::function<std::vector<const TreeNode*>(const TreeNode& anchor)> load_back_reads;
  friend void PrintTo(const ComponentUnderTest& c, std::ostream* os) { *os << c.name; }
};

// A HiCache on the CPU backend; `enable` turns the component on in the kit's base options.
std::unique_ptr<KitSubject> hicache_subject(KitGeometry geometry,
                                            const std::function<void(HiCacheOptions&)>& enable);
// ExampleCache hosting PageChecksumComponent.
std::unique_ptr<KitSubject> example_subject(KitGeometry geometry);

// The four instantiations of the kit.
ComponentUnderTest full_component_under_test();
ComponentUnderTest swa_component_under_test();
ComponentUnderTest mamba_component_under_test();
ComponentUnderTest example_component_under_test();

// --- Random operations on a subject -----------------------------------------------------
struct KitOp {
  enum Kind : uint8_t {
    kServe,           // serve(shape)
    kMatch,           // tree.match_prefix(shape): splits where the match ends inside a node
    kBackup,          // backup of the n-th node (mod path length) on shape's device path
    kEvictDevice,     // evict_device(n pages)
    kEvictComponent,  // evict_component(type under test, n slots)
    kEvictHost,       // evict_host(n pages)
    kLoadBack,        // load_back(match(shape).best_match_node)
    kSettle,          // settle()
    kLock,            // lock(match(shape): n even → last_device_node, odd → best_match_node)
    kUnlock,          // unlock the (n mod held)-th held lock
  };
  Kind kind = kServe;
  Shape shape;
  uint32_t n = 0;
};
void showValue(const KitOp& op, std::ostream& os);

struct OpMix {
  bool evictions = true;  // kEvictDevice, kEvictComponent, kEvictHost
  bool locks = true;      // kLock, kUnlock
};
// Up to max_ops operations (fewer when RapidCheck's size is small).
rc::Gen<std::vector<KitOp>> gen_ops(OpMix mix, int max_ops, int32_t page_size);

// Runs ops against a subject, keeping the locks it holds.
class OpRunner {
 public:
  OpRunner(KitSubject& subject, ComponentType type) : subject_(subject), type_(type) {}
  // Hooks: before_lock is called after the match (which may split) and before lock(); on_lock
  // after lock() with the record; on_unlock before unlock() with it.
  std::function<void()> before_lock;
  std::function<void(const LockRecord&)> on_lock;
  std::function<void(const LockRecord&)> on_unlock;
  // Called before a load-back with the anchor (for anchoring checks); returns the result.
  std::function<void(TreeNode& anchor)> before_load_back;
  std::function<void(TreeNode& anchor, bool loaded)> after_load_back;

  void run(const KitOp& op);
  void unlock_all();
  const std::vector<LockRecord>& held() const { return held_; }

 private:
  KitSubject& subject_;
  ComponentType type_;
  std::vector<LockRecord> held_;
};

// The evicted chain a full-attention load-back anchored at `anchor` reads host values from.
std::vector<const TreeNode*> evicted_chain(const TreeNode& anchor);

// Evicts everything (device, then host, repeatedly) after the caller released its locks.
void evict_everything(KitSubject& subject);

}  // namespace kvsim::conformance
