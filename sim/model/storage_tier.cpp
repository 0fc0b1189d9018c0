#include "sim/model/storage_tier.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/sha256.h"
#include "sim/base/json_reader.h"

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

// lstat only: a FIFO or a symlink under a page's name is never opened or followed here.
bool is_page_file(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  std::error_code ec;
  return name.size() == 64 + 7 && name.substr(64) == ".kvpage" &&
         e.symlink_status(ec).type() == fs::file_type::regular && !ec;
}

constexpr std::string_view kTempPrefix = "kvsim-";
// The tags whose folders hold a copy of a store (the ones a killed run leaves behind).
constexpr std::string_view kStoreTags[] = {"store-snapshot-", "replay-store-", "store-"};

fs::path temp_base() {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  return ec ? fs::path("/tmp") : base;
}

// `kvsim-<tag>-<pid>-XXXXXX` of a store tag: the pid, else 0.
pid_t owner_pid(std::string_view name) {
  if (name.substr(0, kTempPrefix.size()) != kTempPrefix) return 0;
  name.remove_prefix(kTempPrefix.size());
  for (std::string_view tag : kStoreTags) {
    if (name.substr(0, tag.size()) != tag) continue;
    const std::string_view rest = name.substr(tag.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || rest.size() - dash != 7) return 0;
    pid_t pid = 0;
    for (char c : rest.substr(0, dash)) {
      if (c < '0' || c > '9' || pid > 400000000) return 0;
      pid = pid * 10 + (c - '0');
    }
    return pid;
  }
  return 0;
}

std::vector<fs::path> page_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_page_file(*it)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string hex(const Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

}  // namespace

TempDir::TempDir(const std::string& tag) {
  // The pid in the name lets a later run remove the folder if this process is killed
  // (sweep_stale_store_copies).
  std::string templ =
      (temp_base() / ("kvsim-" + tag + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    throw InputError("cannot create a temporary directory " + templ + ": " +
                     std::error_code(errno, std::generic_category()).message());
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

size_t sweep_stale_store_copies() {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(temp_base(), ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = owner_pid(it->path().filename().string());
    std::error_code type_ec;
    if (pid <= 0 || it->symlink_status(type_ec).type() != fs::file_type::directory) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(it->path());  // owner is gone
  }
  std::sort(stale.begin(), stale.end());
  size_t removed = 0;
  for (const fs::path& p : stale) {
    std::error_code rm_ec;
    removed += fs::remove_all(p, rm_ec) > 0 ? 1 : 0;
  }
  return removed;
}

bool run_changes_its_store(const Scenario& s) {
  return s.storage && s.store.backend == StorageKind::kFile && !s.store.dir.empty() &&
         s.store.reuse && s.store.digest.empty();
}

std::string storage_dir_problem(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return std::error_code(errno, std::generic_category()).message();
  }
  if (!S_ISDIR(st.st_mode)) return std::error_code(ENOTDIR, std::generic_category()).message();
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return std::error_code(errno, std::generic_category()).message();
  }
  return "";
}

void check_storage_dir(const Scenario& s) {
  if (!s.storage || s.store.backend != StorageKind::kFile || s.store.dir.empty()) return;
  const std::string problem = storage_dir_problem(s.store.dir);
  if (!problem.empty()) {
    throw InputError((s.source.empty() ? std::string("scenario") : s.source) +
                     ": field cache.storage.dir: " + s.store.dir + ": " + problem);
  }
}

std::string store_digest(const fs::path& dir, uint64_t page_bytes) {
  Sha256 h;
  std::string bytes;
  for (const fs::path& p : page_files(dir)) {
    if (!read_own_page_file(p, page_bytes, &bytes)) continue;
    h.update(p.filename().string());
    h.update(std::to_string(bytes.size()) + ":");
    h.update(bytes);
  }
  return hex(h.finish());
}

size_t copy_store_pages(const fs::path& from, const fs::path& to, uint64_t page_bytes) {
  size_t n = 0;
  std::string bytes;
  for (const fs::path& p : page_files(from)) {
    // Gone meanwhile (another writer evicted it), foreign or oversized: not copied.
    if (!read_own_page_file(p, page_bytes, &bytes)) continue;
    const fs::path target = to / p.filename();
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      const int err = errno;
      std::error_code rm_ec;
      fs::remove(target, rm_ec);
      throw InputError("cannot copy " + p.string() + " to " + to.string() + ": " +
                       std::error_code(err, std::generic_category()).message());
    }
    ++n;
  }
  return n;
}

uint64_t page_payload_bytes(const Scenario& s) {
  return static_cast<uint64_t>(s.cache.page_size) * static_cast<uint64_t>(s.cache.layer_count) *
         static_cast<uint64_t>(s.cache.item_bytes);
}

StorageTier::StorageTier(const Scenario& s) {
  const StorageOptions& o = s.store;
  if (o.backend == StorageKind::kMemory) {
    base_ = std::make_unique<MemoryStorage>(0, static_cast<uint64_t>(o.capacity_bytes));
  } else {
    check_storage_dir(s);
    sweep_stale_store_copies();  // what killed runs left in the temp directory
    const uint64_t page_bytes = page_payload_bytes(s);
    fs::path dir = o.dir;
    bool clear = !o.reuse;
    if (o.dir.empty()) {
      private_dir_ = std::make_unique<TempDir>("store");
      dir = private_dir_->path();
    } else if (!o.digest.empty()) {
      // A replay of a run on a reused store: work on a copy, and only of the same store.
      private_dir_ = std::make_unique<TempDir>("replay-store");
      copy_store_pages(o.dir, private_dir_->path(), page_bytes);
      start_digest_ = store_digest(private_dir_->path(), page_bytes);
      if (start_digest_ != o.digest) {
        throw InputError(
            (s.source.empty() ? std::string("trace") : s.source) +
            ": field cache.storage.digest: the store in " + o.dir + " (digest " +
            start_digest_.substr(0, 16) + "...) is not the one the run started on (" +
            o.digest.substr(0, 16) +
            "...); replay needs that store (kvsim keeps a copy next to a trace it writes, "
            "<trace>.store)");
      }
      dir = private_dir_->path();
      clear = false;
    } else if (o.reuse) {
      snapshot_ = std::make_shared<TempDir>("store-snapshot");
      copy_store_pages(o.dir, snapshot_->path(), page_bytes);
      start_digest_ = store_digest(snapshot_->path(), page_bytes);
    }
    auto file = std::make_unique<FileStorage>(
        dir, FileStorageOptions{.capacity_bytes = static_cast<uint64_t>(o.capacity_bytes),
                                .durable = o.durable,
                                .page_bytes = page_bytes});
    if (!file->ok()) {
      throw InputError((s.source.empty() ? std::string("scenario") : s.source) +
                       ": field cache.storage.dir: " + dir.string() + ": " + file->error());
    }
    if (clear) {
      file->clear();
    } else {
      scrubbed_ = file->scrub();  // reuse (and its replay): damaged pages never reach the run
    }
    foreign_ = file->foreign_count();
    base_ = std::move(file);
  }
  // The contract shadow is exact when the store starts empty and has no budget to evict by.
  const bool starts_empty = base_->page_count() == 0;
  faulty_ = std::make_unique<FaultyStorage>(*base_, o.capacity_bytes == 0 && starts_empty);
  // The budget's eviction order against its reference, when the reference can know every page
  // (storage.budget_order): a memory store, or a file store that starts empty.
  if (starts_empty) {
    const auto capacity = static_cast<uint64_t>(o.capacity_bytes);
    if (auto* mem = dynamic_cast<MemoryStorage*>(base_.get())) {
      faulty_->check_budget_order(std::make_unique<BudgetOrderCheck>(
          *base_, StorageBudgetReference(capacity, mem->capacity_pages(), 0),
          [mem] { return mem->evictions(); }, /*only_budget_refuses=*/true));
    } else if (auto* file = dynamic_cast<FileStorage*>(base_.get())) {
      faulty_->check_budget_order(std::make_unique<BudgetOrderCheck>(
          *base_, StorageBudgetReference(capacity, 0, FileStorage::kHeaderBytes),
          [file] { return file->evictions(); }, /*only_budget_refuses=*/false));
    }
  }
}

StorageRunStats StorageTier::summary(const HiCacheStats& c) const {
  StorageRunStats r;
  r.enabled = true;
  r.backend = std::string(base_->name());
  r.query_hit_pages = c.storage_query_hit_pages;
  r.hit_pages = c.storage_hit_pages;
  r.read_bytes = c.storage_read_bytes;
  r.miss_pages = c.storage_miss_pages;
  r.corrupt_pages = c.storage_corrupt_pages;
  r.read_errors = c.storage_read_errors;
  r.write_failures = c.storage_write_failures;
  r.written_bytes = c.storage_written_bytes;
  const StorageBackend::Usage u = base_->usage();
  r.pages = u.pages;
  r.bytes = u.bytes;
  if (const auto* mem = dynamic_cast<const MemoryStorage*>(base_.get())) {
    r.evictions = mem->evictions();
  } else if (const auto* file = dynamic_cast<const FileStorage*>(base_.get())) {
    r.evictions = file->evictions();
  }
  r.scrubbed_pages = scrubbed_;
  r.foreign_entries = foreign_;
  r.start_digest = start_digest_;
  r.start_snapshot = snapshot_;
  for (size_t i = 0; i < kStorageFaults; ++i)
    r.injected[i] = faulty_->injected(static_cast<StorageFault>(i));
  return r;
}

}  // namespace kvsim::sim
