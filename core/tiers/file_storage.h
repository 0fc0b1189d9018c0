// FileStorage: a StorageBackend with one file per page in a directory.
//
// File layout: magic "KVSIMPG1" | format version u32 | payload length u64 | SHA-256 of the
// payload (32) | the page key (32) | payload. Writes are atomic (a temp file in the same
// directory, then rename). get() validates every header field and the checksum: a truncated,
// altered, misnamed or foreign file is kCorrupt, which callers treat as a miss. exists() looks
// only at the file name, so a corrupt page "exists" until get() finds it out; leftover temp
// files are ignored and removed at construction. Nothing here throws.
#pragma once

#include <filesystem>

#include "core/tiers/storage_backend.h"

namespace kvsim {

class FileStorage final : public StorageBackend {
 public:
  explicit FileStorage(std::filesystem::path dir);
  std::string_view name() const override { return "file"; }
  bool ok() const { return ok_; }  // false if the directory could not be created
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
