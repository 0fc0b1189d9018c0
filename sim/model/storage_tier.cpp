#include "sim/model/storage_tier.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/sha256.h"
#include "sim/base/json_reader.h"

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

bool is_page_file(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  std::error_code ec;
  return name.size() == 64 + 7 && name.substr(64) == ".kvpage" && e.is_regular_file(ec);
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
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  std::string templ = ((ec ? fs::path("/tmp") : base) / ("kvsim-" + tag + "-XXXXXX")).string();
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

std::string store_digest(const fs::path& dir) {
  Sha256 h;
  for (const fs::path& p : page_files(dir)) {
    std::ifstream in(p, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    h.update(p.filename().string());
    h.update(std::to_string(bytes.size()) + ":");
    h.update(bytes);
  }
  return hex(h.finish());
}

size_t copy_store_pages(const fs::path& from, const fs::path& to) {
  size_t n = 0;
  for (const fs::path& p : page_files(from)) {
    std::error_code ec;
    fs::copy_file(p, to / p.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec == std::errc::no_such_file_or_directory && !fs::exists(p))
      continue;  // evicted by
                 // another writer
    if (ec) {
      throw InputError("cannot copy " + p.string() + " to " + to.string() + ": " + ec.message());
    }
    ++n;
  }
  return n;
}

StorageTier::StorageTier(const Scenario& s) {
  const StorageOptions& o = s.store;
  if (o.backend == StorageKind::kMemory) {
    base_ = std::make_unique<MemoryStorage>(0, static_cast<uint64_t>(o.capacity_bytes));
  } else {
    check_storage_dir(s);
    fs::path dir = o.dir;
    bool clear = !o.reuse;
    if (o.dir.empty()) {
      private_dir_ = std::make_unique<TempDir>("store");
      dir = private_dir_->path();
    } else if (!o.digest.empty()) {
      // A replay of a run on a reused store: work on a copy, and only of the same store.
      private_dir_ = std::make_unique<TempDir>("replay-store");
      copy_store_pages(o.dir, private_dir_->path());
      start_digest_ = store_digest(private_dir_->path());
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
      copy_store_pages(o.dir, snapshot_->path());
      start_digest_ = store_digest(snapshot_->path());
    }
    auto file = std::make_unique<FileStorage>(
        dir, FileStorageOptions{.capacity_bytes = static_cast<uint64_t>(o.capacity_bytes),
                                .durable = o.durable});
    if (!file->ok()) {
      throw InputError((s.source.empty() ? std::string("scenario") : s.source) +
                       ": field cache.storage.dir: " + dir.string() + ": " + file->error());
    }
    if (clear) {
      file->clear();
    } else {
      scrubbed_ = file->scrub();  // reuse (and its replay): damaged pages never reach the run
    }
    base_ = std::move(file);
  }
  // The contract shadow is exact when the store starts empty and has no budget to evict by.
  faulty_ =
      std::make_unique<FaultyStorage>(*base_, o.capacity_bytes == 0 && base_->page_count() == 0);
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
  r.start_digest = start_digest_;
  r.start_snapshot = snapshot_;
  for (size_t i = 0; i < kStorageFaults; ++i)
    r.injected[i] = faulty_->injected(static_cast<StorageFault>(i));
  return r;
}

}  // namespace kvsim::sim
