// FileStorage: a StorageBackend with one file per page in a directory (SGLang's HiCacheFile,
// with a self-validating file format, a byte budget and an optional durable mode).
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
//  1. Writes are atomic: set() writes `<hex>.tmp.<pid>.<n>` (unique per process and call) in the
//     same directory, then renames it onto the page's name, so a page file is either absent or
//     complete as written — as far as the file system keeps its promises. With `durable`, the
//     temp file is fsync'ed before the rename and the directory after it (the textbook
//     sequence), so a set() that returned kOk survives power loss; without it, a crash may
//     leave a page missing, empty or torn, which get() then reports as kCorrupt (never as
//     data). docs/storage.md says what each mode survives.
//  2. get() validates magic, version, length (against the file's real size: a truncated or
//     extended file), the key recorded in the header (a file under another page's name) and the
//     payload checksum. Any mismatch is kCorrupt; a file that exists but cannot be opened or
//     read is kIoError. No file content can make it throw, crash or allocate more than the
//     file's size. The caller removes a kCorrupt page (HiCache does: it heals the store).
//  3. exists() (and so batch_exists() and set()'s dedup) is only as good as the page's header:
//     the file must be a regular file whose header has the magic, the version, this key and a
//     length equal to the file's size. A damaged header, a truncated or a zero-length file does
//     not exist, and set() overwrites it. (The payload checksum is get()'s job: a page whose
//     payload alone is damaged exists until get() finds it out.)
//  4. Only regular files named `<64 lowercase hex>.kvpage` are pages; page_count() and usage()
//     scan the directory and every other file is ignored. Nothing but a regular file is ever
//     opened for its content (open with O_NONBLOCK | O_NOFOLLOW, then fstat): a FIFO, a symlink,
//     a directory or a device under a page's name is *foreign* — exists() is false, get() a
//     miss, scrub() leaves it, foreign_count() counts it. With options.page_bytes set, a whole,
//     well-formed page whose payload has another length (another model geometry sharing the
//     directory) is foreign too: never read past its header, never removed as damaged, never
//     counted in usage(); a set() of the same key replaces it (the keys do not carry the
//     geometry). clear() unlinks every entry under a page's name but a directory, without
//     opening it. At construction, temp files older
//     than `stale_temp_seconds` (an interrupted set() of any process) are removed; younger ones
//     may belong to another process writing now, and stay.
//  5. Budget: with capacity_bytes > 0, a set() of a new page first removes least recently used
//     pages until the directory's known bytes (file sizes) plus the new file fit; a file larger
//     than the budget on its own is refused with kIoError. Recency is a logical counter
//     (deterministic): pages found on disk at construction are ordered by file time then name,
//     older first; then a set() that writes and a get() that hits each count as a use. Pages
//     another process writes into a shared directory join the order when this one reads them.
//  6. A write that fails for want of space (ENOSPC, EDQUOT) sets out_of_space(): the caller
//     treats it as an environment problem, not as a store's answer (the simulator stops the run
//     with an input error naming the directory).
//  7. The directory is never created here: if it is missing, not a directory, or not writable,
//     ok() is false and error() says why (the OS's words); set() then reports kIoError and
//     get() kMiss. Nothing here throws.
//  8. File times are wall-clock: they order pages found at start and age temp files, and are
//     never consulted after construction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "core/tiers/storage_backend.h"

namespace kvsim {

struct FileStorageOptions {
  uint64_t capacity_bytes = 0;           // 0 = unlimited
  bool durable = false;                  // fsync file and directory around the rename
  int64_t stale_temp_seconds = 15 * 60;  // temp files older than this are removed at start
  uint64_t page_bytes = 0;  // this model's page payload; another length is foreign. 0 = any
};

// Reads the page file at `path` whole into `bytes` if it is one a copy of the store keeps: a
// regular file (opened O_NONBLOCK | O_NOFOLLOW), with page_bytes set no larger than a page of
// that payload and not a well-formed page of another payload length. False otherwise (gone, a
// FIFO or symlink, oversized, another geometry's, unreadable): nothing is read past that bound.
bool read_own_page_file(const std::filesystem::path& path, uint64_t page_bytes, std::string* bytes);

class FileStorage final : public StorageBackend {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kHeaderBytes = 8 + 4 + 8 + 32 + 32;

  explicit FileStorage(std::filesystem::path dir, FileStorageOptions options = {});
  std::string_view name() const override { return "file"; }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }  // why !ok(), or the last failed write
  const std::filesystem::path& dir() const { return dir_; }
  const FileStorageOptions& options() const { return options_; }
  bool exists(const PageDigest& key) override;
  StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) override;
  StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) override;
  void remove(const PageDigest& key) override;
  size_t page_count() const override;
  Usage usage() const override;
  std::filesystem::path path_of(const PageDigest& key) const;
  // Removes every page file (temp files of other processes are left alone).
  void clear();
  // Validates every page file (as get() does, without counting a use) and removes the damaged
  // ones; returns how many it removed.
  size_t scrub();
  // Entries under a page's name that are not this store's pages (contract 4), counted now;
  // foreign_at_start() is the count the constructor saw.
  size_t foreign_count() const;
  uint64_t foreign_at_start() const { return foreign_at_start_; }
  // A write failed for want of space (contract 6); error() has the OS's words.
  bool out_of_space() const { return out_of_space_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t stale_temps_removed() const { return stale_temps_removed_; }

 private:
  struct Known {
    uint64_t bytes = 0;
    uint64_t last_use = 0;
  };
  enum class Entry : uint8_t { kPage, kForeign, kOther };
  Entry classify(const std::filesystem::directory_entry& e) const;
  void note_write_error(int err);
  void touch(const PageDigest& key, uint64_t bytes);
  void forget(const PageDigest& key);
  StorageStatus read_page(const PageDigest& key, std::vector<std::byte>* out);
  StorageStatus write_file(const std::filesystem::path& tmp, std::span<const char> header,
                           std::span<const std::byte> payload);

  std::filesystem::path dir_;
  FileStorageOptions options_;
  bool ok_ = false;
  std::string error_;
  uint64_t temp_counter_ = 0;
  uint64_t clock_ = 0;
  uint64_t known_bytes_ = 0;
  uint64_t evictions_ = 0;
  uint64_t stale_temps_removed_ = 0;
  uint64_t foreign_at_start_ = 0;
  bool out_of_space_ = false;
  std::map<PageDigest, Known> known_;   // pages this instance knows of
  std::map<uint64_t, PageDigest> lru_;  // last_use → key
};

}  // namespace kvsim
