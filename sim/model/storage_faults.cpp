#include "sim/model/storage_faults.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "sim/base/json_reader.h"

namespace kvsim::sim {
namespace {

constexpr std::array<std::string_view, kStorageFaults> kNames = {
    "none",       "read_error",  "vanish",     "corrupt",
    "wrong_size", "write_error", "torn_write", "slow_io"};

}  // namespace

std::string_view to_string(StorageFault fault) {
  const auto i = static_cast<size_t>(fault);
  return i < kNames.size() ? kNames[i] : "?";
}

bool parse_storage_fault(std::string_view name, StorageFault* out) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) {
      *out = static_cast<StorageFault>(i);
      return true;
    }
  }
  return false;
}

bool FaultyStorage::take(StorageFault f) {
  if (armed_ != f) return false;
  armed_ = StorageFault::kNone;
  ++injected_[static_cast<size_t>(f)];
  return true;
}

bool FaultyStorage::damage(const PageDigest& key, bool torn) {
  if (auto* mem = dynamic_cast<MemoryStorage*>(&inner_)) {
    std::vector<std::byte>* bytes = mem->damage_for_testing(key);
    if (bytes == nullptr) return false;
    if (torn) {
      bytes->resize(bytes->size() / 2);
    } else if (!bytes->empty()) {
      (*bytes)[bytes->size() / 2] ^= std::byte{0x5a};
    } else {
      bytes->push_back(std::byte{1});
    }
    return true;
  }
  if (auto* file = dynamic_cast<FileStorage*>(&inner_)) {
    const std::string path = file->path_of(key).string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat st {};
    bool done = false;
    if (::fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(FileStorage::kHeaderBytes)) {
      const off_t payload = st.st_size - static_cast<off_t>(FileStorage::kHeaderBytes);
      if (torn) {
        done = ::ftruncate(fd, static_cast<off_t>(FileStorage::kHeaderBytes) + payload / 2) == 0;
      } else {
        const off_t at = static_cast<off_t>(FileStorage::kHeaderBytes) + payload / 2;
        char c = 0;
        if (::pread(fd, &c, 1, at) == 1) {
          c = static_cast<char>(c ^ 0x5a);
          done = ::pwrite(fd, &c, 1, at) == 1;
        }
      }
    }
    ::close(fd);
    return done;
  }
  return false;
}

namespace {

uint64_t payload_digest(std::span<const std::byte> bytes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (std::byte b : bytes)
    h = (h ^ static_cast<uint8_t>(b)) * 1099511628211ull;
  return h;
}

std::string key_text(const PageDigest& key) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < 6; ++i) {
    s += hex[key[i] >> 4];
    s += hex[key[i] & 15];
  }
  return s + "...";
}

}  // namespace

void FaultyStorage::stop_if_out_of_space(size_t payload_bytes) const {
  const auto* file = dynamic_cast<const FileStorage*>(&inner_);
  if (file == nullptr || !file->out_of_space()) return;
  throw InputError("storage directory " + file->dir().string() + " is full: writing a page of " +
                   std::to_string(FileStorage::kHeaderBytes + payload_bytes) + " bytes failed (" +
                   file->error() +
                   "); free space there or set cache.storage.capacity_bytes below what it holds");
}

void FaultyStorage::breach(std::string what) {
  if (!broken_) broken_ = std::move(what);
}

void FaultyStorage::check_read(const PageDigest& key, StorageStatus status,
                               const std::vector<std::byte>& got) {
  if (!exact_) return;
  const auto it = shadow_.find(key);
  if (it == shadow_.end()) {
    if (status != StorageStatus::kMiss) {
      breach("get(" + key_text(key) + ") of a page never stored (or removed) returned " +
             std::string(to_string(status)));
    }
    return;
  }
  if (it->second.damaged) return;  // a fault damaged it: kCorrupt, or kMiss once removed
  if (status != StorageStatus::kOk) {
    breach("get(" + key_text(key) + ") of a stored, undamaged page returned " +
           std::string(to_string(status)) + " with no fault armed");
  } else if (got.size() != it->second.size || payload_digest(got) != it->second.digest) {
    breach("get(" + key_text(key) + ") returned " + std::to_string(got.size()) +
           " bytes that are not the " + std::to_string(it->second.size) + " bytes stored");
  }
}

bool FaultyStorage::exists(const PageDigest& key) {
  const bool found = inner_.exists(key);
  const auto it = shadow_.find(key);
  // A damaged page may or may not count as stored (a file store can tell a torn file).
  if (exact_ && (it == shadow_.end() || !it->second.damaged) && found != (it != shadow_.end())) {
    breach("exists(" + key_text(key) + ") is " + (found ? "true" : "false") + " but the page " +
           (found ? "was never stored or was removed" : "was stored and never removed"));
  }
  return found;
}

size_t FaultyStorage::batch_exists(std::span<const PageDigest> keys) {
  const size_t n = inner_.batch_exists(keys);
  if (exact_) {
    size_t want = 0;
    bool damaged = false;  // a damaged page may or may not count as stored: no verdict
    while (want < keys.size()) {
      const auto it = shadow_.find(keys[want]);
      if (it == shadow_.end()) break;
      damaged = damaged || it->second.damaged;
      ++want;
    }
    if (n != want && !damaged) {
      breach("batch_exists of " + std::to_string(keys.size()) + " keys is " + std::to_string(n) +
             "; the leading stored pages are " + std::to_string(want));
    }
  }
  return n;
}

void FaultyStorage::remove(const PageDigest& key) {
  inner_.remove(key);
  if (budget_) budget_->removed(key);
  shadow_.erase(key);
}

StorageStatus FaultyStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  bool short_read = false;
  const StorageStatus status = faulty_get(key, out, &short_read);
  switch (status) {
    case StorageStatus::kOk:
      ++(short_read ? calls_.get_short : calls_.get_ok);
      break;
    case StorageStatus::kMiss:
      ++calls_.get_miss;
      break;
    case StorageStatus::kCorrupt:
      ++calls_.get_corrupt;
      break;
    case StorageStatus::kIoError:
      ++calls_.get_io_error;
      break;
  }
  return status;
}

StorageStatus FaultyStorage::faulty_get(const PageDigest& key, std::vector<std::byte>* out,
                                        bool* short_read) {
  if (skip_reads_ > 0) {
    --skip_reads_;
    const StorageStatus status = inner_.get(key, out);
    if (budget_) budget_->after_get(key, status);
    check_read(key, status, *out);
    return status;
  }
  if (take(StorageFault::kReadError)) return StorageStatus::kIoError;
  if (take(StorageFault::kVanish)) {
    inner_.remove(key);
    if (budget_) budget_->removed(key);
    shadow_.erase(key);
  }
  if (take(StorageFault::kCorrupt)) {
    if (auto it = shadow_.find(key); it != shadow_.end()) it->second.damaged = true;
    if (!damage(key, /*torn=*/false)) {
      return inner_.exists(key) ? StorageStatus::kCorrupt : StorageStatus::kMiss;
    }
  }
  const StorageStatus status = inner_.get(key, out);
  if (budget_) budget_->after_get(key, status);
  check_read(key, status, *out);
  if (status == StorageStatus::kOk && !out->empty() && take(StorageFault::kWrongSize)) {
    out->pop_back();
    *short_read = true;
  }
  return status;
}

StorageStatus FaultyStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  const StorageStatus status = faulty_set(key, payload);
  ++(status == StorageStatus::kOk ? calls_.set_ok : calls_.set_failed);
  return status;
}

StorageStatus FaultyStorage::faulty_set(const PageDigest& key, std::span<const std::byte> payload) {
  if (take(StorageFault::kWriteError)) return StorageStatus::kIoError;
  const bool fresh = armed_ == StorageFault::kTornWrite && !inner_.exists(key);
  if (budget_) budget_->before_set(key, payload.size());
  const StorageStatus status = inner_.set(key, payload);
  if (status != StorageStatus::kOk) stop_if_out_of_space(payload.size());
  if (budget_) budget_->after_set(key, payload.size(), status);
  if (exact_) {
    if (status != StorageStatus::kOk) {
      breach("set(" + key_text(key) + ") returned " + std::string(to_string(status)) +
             " on a store without a budget, with no fault armed");
    } else if (!inner_.exists(key)) {
      breach("set(" + key_text(key) + ") returned ok but the page is not stored");
    } else if (shadow_.count(key) == 0) {  // a second set of a key keeps the first bytes
      shadow_[key] = ShadowPage{payload_digest(payload), payload.size(), false};
    }
  }
  if (status == StorageStatus::kOk && fresh && take(StorageFault::kTornWrite)) {
    damage(key, /*torn=*/true);
    if (auto it = shadow_.find(key); it != shadow_.end()) it->second.damaged = true;
  }
  return status;
}

}  // namespace kvsim::sim
