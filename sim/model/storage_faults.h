// FaultyStorage: a StorageBackend decorator that injects the storage tier's operating faults
// into any backend, one armed fault at a time. The scheduler decides the faults (BUGGIFY sites
// in sim/model/faults.h) and records each in the kStorage op it applies to, so replay and shrinking
// inject exactly the same ones.
//
// Faults (a read fault hits the next get(), a write fault the next set(), while armed):
//   read_error   get() fails with kIoError (the page stays);
//   vanish       the page is removed just before get() (another writer evicted it after a
//                positive hit query): kMiss;
//   corrupt      the stored page is damaged before get() — a payload byte of a file page
//                flipped on disk, of a memory page flipped in memory — so the backend's own
//                validation reports kCorrupt (a backend it cannot damage reports kCorrupt);
//   wrong_size   get() returns kOk with a payload one byte short (a foreign writer's page);
//   write_error  set() fails with kIoError and stores nothing (ENOSPC, EIO);
//   torn_write   set() stores the page, then it is torn — a file page truncated mid-payload, a
//                memory page cut short — and set() still reports kOk (a crash before the data
//                reached the disk);
//   slow_io      the whole storage step makes no progress (the executor skips it).
// Every fault leaves the store in a state the backend's contract covers; the content oracle
// must hold under all of them.
//
// The decorator also checks the backend's contract (core/tiers/storage_backend.h) against a
// shadow of what the core stored, when the store started empty and has no budget (so it never
// drops a page on its own): a set() that fails or does not store with no fault armed, a get()
// of a stored page that is not kOk with its exact bytes, a page found that was never stored or
// was removed, exists() and batch_exists() disagreeing with the shadow. A write that fails for
// want of space is neither: it stops the run with an InputError naming the directory. The first
// breach is kept (contract_broken()); the executor reports it as invariant storage.contract.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tiers/storage_backend.h"
#include "sim/model/storage_budget_reference.h"

namespace kvsim::sim {

// Do not renumber: embedded in op traces (by name) and in Op::n of kStorage ops (the fault in
// the low byte, the reads it skips above it: kStorageFaultSkipShift).
enum class StorageFault : uint8_t {
  kNone = 0,
  kReadError = 1,
  kVanish = 2,
  kCorrupt = 3,
  kWrongSize = 4,
  kWriteError = 5,
  kTornWrite = 6,
  kSlowIo = 7,
};
inline constexpr size_t kStorageFaults = 8;
inline constexpr int kStorageFaultSkipShift = 8;

std::string_view to_string(StorageFault fault);
// False for an unknown name.
bool parse_storage_fault(std::string_view name, StorageFault* out);

// What the store answered the core, call by call (after any fault): the cache's own storage
// statistics must agree with it (invariant storage.stats).
struct StorageCallCounts {
  uint64_t set_ok = 0, set_failed = 0;
  uint64_t get_ok = 0, get_short = 0, get_miss = 0, get_corrupt = 0, get_io_error = 0;
};

class FaultyStorage final : public StorageBackend {
 public:
  // `exact`: the store starts empty and never evicts, so the shadow knows every page it holds.
  explicit FaultyStorage(StorageBackend& inner, bool exact = false)
      : inner_(inner), exact_(exact) {}
  // A read fault meets the get() after `skip_reads` others in the same step (a later page of
  // the batch); a write fault meets the next set().
  void arm(StorageFault fault, uint32_t skip_reads = 0) {
    armed_ = fault;
    skip_reads_ = skip_reads;
  }
  void disarm() { armed_ = StorageFault::kNone; }
  // How often each fault was applied (armed and met its get or set).
  uint64_t injected(StorageFault f) const { return injected_[static_cast<size_t>(f)]; }
  void count_slow_io() { ++injected_[static_cast<size_t>(StorageFault::kSlowIo)]; }
  StorageBackend& inner() { return inner_; }

  std::string_view name() const override { return inner_.name(); }
  bool exists(const PageDigest& key) override;
  size_t batch_exists(std::span<const PageDigest> keys) override;
  StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) override;
  StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) override;
  void remove(const PageDigest& key) override;
  // The first breach of the backend's contract the shadow saw (nullopt: none, or not exact).
  const std::optional<std::string>& contract_broken() const { return broken_; }
  const StorageCallCounts& calls() const { return calls_; }
  // Compares the inner store's budget evictions with a reference from now on (a store that
  // starts empty); the first divergence is budget_order_broken() (invariant
  // storage.budget_order).
  void check_budget_order(std::unique_ptr<BudgetOrderCheck> check) { budget_ = std::move(check); }
  std::optional<std::string> budget_order_broken() const {
    return budget_ ? budget_->broken() : std::nullopt;
  }
  size_t page_count() const override { return inner_.page_count(); }
  Usage usage() const override { return inner_.usage(); }

 private:
  // Damages the stored page: a flipped payload byte (torn = false) or a cut payload (torn).
  // False when the backend cannot be damaged from here or the page is absent.
  bool damage(const PageDigest& key, bool torn);
  bool take(StorageFault f);  // true (and disarms) when `f` is armed
  // The shadow: what a correct store holds now (payload digest and size; damaged by a fault).
  struct ShadowPage {
    uint64_t digest = 0;
    size_t size = 0;
    bool damaged = false;
  };
  void check_read(const PageDigest& key, StorageStatus status, const std::vector<std::byte>& got);
  StorageStatus faulty_get(const PageDigest& key, std::vector<std::byte>* out, bool* short_read);
  StorageStatus faulty_set(const PageDigest& key, std::span<const std::byte> payload);
  void breach(std::string what);
  // A file store's write failed for want of space (ENOSPC, EDQUOT): the environment, not the
  // store's contract nor a fault; throws InputError naming the directory (exit 2).
  void stop_if_out_of_space(size_t payload_bytes) const;

  StorageBackend& inner_;
  bool exact_ = false;
  std::map<PageDigest, ShadowPage> shadow_;
  std::optional<std::string> broken_;
  StorageCallCounts calls_;
  StorageFault armed_ = StorageFault::kNone;
  uint32_t skip_reads_ = 0;
  std::array<uint64_t, kStorageFaults> injected_{};
  std::unique_ptr<BudgetOrderCheck> budget_;  // null: no budget-order check
};

}  // namespace kvsim::sim
