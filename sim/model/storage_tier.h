// StorageTier: the storage tier a scenario asks for (cache.storage, docs/storage.md), built for
// one executor: the backend, the fault-injecting decorator around it, and what a run on a
// persistent store needs to stay replayable.
//
//  - memory: a MemoryStorage with the byte budget.
//  - file, no dir: a private temporary directory, removed when the run ends.
//  - file with dir, reuse false: the directory's pages are removed first (a run starts from an
//    empty store, so a seed's event hash does not depend on what earlier runs left).
//  - file with dir, reuse true: the run starts on what the directory holds. Before it starts,
//    the pages are copied to a private snapshot and digested (start_digest), then the store is
//    scrubbed (every damaged page removed and counted: scrubbed_pages); a trace of the run
//    records the digest in cache.storage.digest and the CLI keeps the snapshot next to the trace
//    (<trace>.store/), so the failure replays.
//  - file with a digest (a replay of such a trace): the pages of `dir` are copied to a private
//    directory and the run uses the copy; if their digest is not the recorded one the replay is
//    refused (InputError), never run on a different store.
// Directory problems (missing, not a directory, not writable) are InputErrors that name the
// field cache.storage.dir and the OS's reason; check_storage_dir reports them before any run.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/cache/hi_cache.h"
#include "core/tiers/storage_backend.h"
#include "sim/config/scenario.h"
#include "sim/model/storage_faults.h"

namespace kvsim::sim {

// A private temporary directory (mkdtemp), `kvsim-<tag>-<pid>-XXXXXX`, removed with everything
// in it when the last owner lets go (or by sweep_stale_store_copies once the process is gone).
class TempDir {
 public:
  explicit TempDir(const std::string& tag);  // throws InputError if it cannot be created
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// What the summary reports about the storage tier (zero when there is none).
struct StorageRunStats {
  bool enabled = false;
  std::string backend;
  int64_t query_hit_pages = 0, hit_pages = 0, read_bytes = 0, miss_pages = 0;
  int64_t corrupt_pages = 0, read_errors = 0, write_failures = 0, written_bytes = 0;
  uint64_t pages = 0, bytes = 0;  // what the store holds at the end
  uint64_t evictions = 0;         // pages dropped for the budget
  uint64_t scrubbed_pages = 0;    // reuse: damaged pages removed before the run started
  uint64_t foreign_entries = 0;   // file: entries under a page's name that are not this model's
                                  // pages (another geometry's, a FIFO, a symlink): left alone
  std::string start_digest;       // reuse: digest of the store the run started on
  std::shared_ptr<TempDir> start_snapshot;  // reuse: a copy of that store (for the trace)
  std::array<uint64_t, kStorageFaults> injected{};
};

// "" when `dir` can be a file store (an existing, writable directory), else the OS's reason.
std::string storage_dir_problem(const std::string& dir);
// Throws InputError "<source>: field cache.storage.dir: <dir>: <reason>" for a bad directory.
void check_storage_dir(const Scenario& s);
// SHA-256 (hex) over the page files of `dir` in name order: name, size and bytes of each. With
// page_bytes (a page's payload), only the files copy_store_pages copies count.
std::string store_digest(const std::filesystem::path& dir, uint64_t page_bytes = 0);
// Copies the page files of `from` into the existing directory `to`; returns how many. Only
// regular files are read (never a FIFO or a symlink); with page_bytes, nothing larger than a page
// of that payload and no well-formed page of another payload length (another geometry's) is
// copied, so a sparse 1 TiB file costs nothing. A page another process removes meanwhile is
// skipped.
size_t copy_store_pages(const std::filesystem::path& from, const std::filesystem::path& to,
                        uint64_t page_bytes = 0);
// The payload bytes of one of the scenario's pages in the store (page_size x layers x item).
uint64_t page_payload_bytes(const Scenario& s);
// True when a run of `s` starts on a store it then changes (a file store in `dir` with reuse):
// running the same seed again starts elsewhere, so a failure's trace must be recorded by the
// run that failed, not by a re-run.
bool run_changes_its_store(const Scenario& s);
// Removes the temp-directory copies of stores (`kvsim-store-snapshot-<pid>-*`, ...-replay-store-,
// ...-store-) whose owning process is gone (a run killed by a signal skips TempDir's
// destructor); returns how many. A folder of a live process, or without a pid, stays.
size_t sweep_stale_store_copies();

class StorageTier {
 public:
  explicit StorageTier(const Scenario& s);  // throws InputError
  StorageTier(const StorageTier&) = delete;
  StorageTier& operator=(const StorageTier&) = delete;

  StorageBackend* backend() { return faulty_.get(); }
  FaultyStorage& faults() { return *faulty_; }
  const std::string& start_digest() const { return start_digest_; }
  StorageRunStats summary(const HiCacheStats& cache) const;

 private:
  std::unique_ptr<StorageBackend> base_;
  std::unique_ptr<FaultyStorage> faulty_;
  std::unique_ptr<TempDir> private_dir_;  // the store itself, when it is private
  std::shared_ptr<TempDir> snapshot_;     // reuse: the store the run started on
  std::string start_digest_;
  uint64_t scrubbed_ = 0;
  uint64_t foreign_ = 0;
};

}  // namespace kvsim::sim
