#include "sim/storage_faults.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"

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
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
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

StorageStatus FaultyStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  if (skip_reads_ > 0) {
    --skip_reads_;
    return inner_.get(key, out);
  }
  if (take(StorageFault::kReadError)) return StorageStatus::kIoError;
  if (take(StorageFault::kVanish)) inner_.remove(key);
  if (take(StorageFault::kCorrupt) && !damage(key, /*torn=*/false)) {
    return inner_.exists(key) ? StorageStatus::kCorrupt : StorageStatus::kMiss;
  }
  const StorageStatus status = inner_.get(key, out);
  if (status == StorageStatus::kOk && !out->empty() && take(StorageFault::kWrongSize)) {
    out->pop_back();
  }
  return status;
}

StorageStatus FaultyStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (take(StorageFault::kWriteError)) return StorageStatus::kIoError;
  const bool fresh = armed_ == StorageFault::kTornWrite && !inner_.exists(key);
  const StorageStatus status = inner_.set(key, payload);
  if (status == StorageStatus::kOk && fresh && take(StorageFault::kTornWrite)) {
    damage(key, /*torn=*/true);
  }
  return status;
}

}  // namespace kvsim::sim
