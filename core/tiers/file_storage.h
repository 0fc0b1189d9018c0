// FileStorage: a StorageBackend with one file per page in a directory (SGLang's HiCacheFile,
// with a self-validating file format).
//
// File `<64 hex digits of the key>.kvpage`, little-endian:
//   offset  0  magic "KVSIMPG1"            (8 bytes)
//   offset  8  format version, u32         (kFormatVersion = 1)
//   offset 12  payload length, u64
//   offset 20  SHA-256 of the payload      (32 bytes)
//   offset 52  the page key                (32 bytes)
//   offset 84  payload                     (length bytes; nothing follows it)
//
// Contract (in addition to StorageBackend's, storage_backend.h):
//  1. Writes are atomic: set() writes `<hex>.tmp.<n>` in the same directory, then renames it
//     onto the page's name, so a page file is either absent or complete as written. No fsync:
//     durability across power loss is not a goal of the simulator.
//  2. get() validates magic, version, length (against the file's real size: a truncated or
//     extended file), the key recorded in the header (a file under another page's name) and the
//     payload checksum. Any mismatch is kCorrupt; a file that exists but cannot be opened or
//     read is kIoError. No file content can make it throw, crash or allocate more than the
//     file's size.
//  3. exists() (and so batch_exists() and set()'s dedup) looks only at the file name: a corrupt
//     page "exists" until get() finds it out, and set() does not overwrite it; callers treat the
//     kCorrupt from get() as a miss. remove() then set() rewrites it.
//  4. Only regular files named `<64 lowercase hex>.kvpage` are pages; page_count() counts them
//     and every other file in the directory is ignored. Leftover temp files (`<64 hex>.tmp.<n>`,
//     from an interrupted set()) are removed at construction.
//  5. The directory (and its parents) is created if missing; if that fails, ok() is false, set()
//     reports kIoError and get() reports kMiss. Nothing here throws.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/tiers/storage_backend.h"

namespace kvsim {

class FileStorage final : public StorageBackend {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kHeaderBytes = 8 + 4 + 8 + 32 + 32;

  explicit FileStorage(std::filesystem::path dir);
  std::string_view name() const override { return "file"; }
  bool ok() const { return ok_; }  // false if the directory could not be created
  const std::filesystem::path& dir() const { return dir_; }
  bool exists(const PageDigest& key) override;
  StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) override;
  StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) override;
  void remove(const PageDigest& key) override;
  size_t page_count() const override;
  std::filesystem::path path_of(const PageDigest& key) const;

 private:
  std::filesystem::path dir_;
  bool ok_ = false;
  uint64_t temp_counter_ = 0;
};

}  // namespace kvsim
