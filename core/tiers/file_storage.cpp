#include "core/tiers/file_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tiers/page_hash.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

constexpr std::array<char, 8> kMagic = {'K', 'V', 'S', 'I', 'M', 'P', 'G', '1'};
constexpr std::string_view kSuffix = ".kvpage";
constexpr std::string_view kTempInfix = ".tmp.";
constexpr size_t kHexChars = 64;
// Header field offsets (see file_storage.h).
constexpr size_t kVersionAt = 8;
constexpr size_t kLengthAt = 12;
constexpr size_t kChecksumAt = 20;
constexpr size_t kKeyAt = 52;
static_assert(kKeyAt + 32 == FileStorage::kHeaderBytes);

template <typename T>
void put_le(char* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

template <typename T>
T get_le(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_hex64(std::string_view s) {
  if (s.size() != kHexChars) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return hex_value(c) >= 0; });
}

PageDigest from_hex(std::string_view s) {
  PageDigest d{};
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = static_cast<uint8_t>(hex_value(s[2 * i]) * 16 + hex_value(s[2 * i + 1]));
  return d;
}

bool is_page_name(std::string_view name) {
  return name.size() == kHexChars + kSuffix.size() && name.substr(kHexChars) == kSuffix &&
         is_hex64(name.substr(0, kHexChars));
}

// `<hex>.tmp.<digits>` (older format) or `<hex>.tmp.<pid>.<n>`.
bool is_temp_name(std::string_view name) {
  if (name.size() <= kHexChars + kTempInfix.size()) return false;
  if (!is_hex64(name.substr(0, kHexChars))) return false;
  if (name.substr(kHexChars, kTempInfix.size()) != kTempInfix) return false;
  const std::string_view tail = name.substr(kHexChars + kTempInfix.size());
  if (tail.front() == '.' || tail.back() == '.') return false;
  size_t dots = 0;
  for (char c : tail) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots <= 1;
}

std::span<const uint8_t> as_u8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

std::string os_error(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `n` bytes at `offset`; false on a short read or an error (errno tells which:
// 0 for a short read).
bool read_exact(int fd, char* p, size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

bool write_exact(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

enum class Header : uint8_t { kOk, kMissing, kCorrupt, kIoError, kForeign };

// Opens `path` and validates everything but the payload checksum (contract 3). On kOk, `fd`
// holds the open file, `length` the payload length and `header` the header bytes.
Header open_page(const fs::path& path, const PageDigest& key, uint64_t page_bytes, int* fd_out,
                 uint64_t* length, std::array<char, FileStorage::kHeaderBytes>* header) {
  // O_NONBLOCK: a FIFO under a page's name opens at once instead of waiting for a writer;
  // O_NOFOLLOW: a symlink is not followed. Neither is a page (contract 4).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Header::kMissing;
    return errno == ELOOP ? Header::kForeign : Header::kIoError;
  }
  Fd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Header::kIoError;
  if (!S_ISREG(st.st_mode)) return Header::kForeign;  // a FIFO, a directory, a device
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < FileStorage::kHeaderBytes) return Header::kCorrupt;  // includes the empty file
  if (!read_exact(fd, header->data(), header->size(), 0)) {
    return errno == 0 ? Header::kCorrupt : Header::kIoError;
  }
  if (std::memcmp(header->data(), kMagic.data(), kMagic.size()) != 0) return Header::kCorrupt;
  if (get_le<uint32_t>(header->data() + kVersionAt) != FileStorage::kFormatVersion) {
    return Header::kCorrupt;
  }
  // The length must match the real file: a truncated or extended file is corrupt. Checking it
  // before allocating means a forged length cannot make us allocate more than the file holds.
  *length = get_le<uint64_t>(header->data() + kLengthAt);
  if (*length != size - FileStorage::kHeaderBytes) return Header::kCorrupt;
  if (std::memcmp(header->data() + kKeyAt, key.data(), key.size()) != 0) {
    return Header::kCorrupt;  // another page's file under this name
  }
  // A whole, well-formed page of another size: another model geometry's page (item_bytes,
  // layer_count or page_size differ) sharing the directory. Not ours, and not damaged.
  if (page_bytes != 0 && *length != page_bytes) return Header::kForeign;
  *fd_out = fd;
  guard.fd = -1;
  return Header::kOk;
}

// lstat, never open: a FIFO or a symlink under a page's name is seen without touching it.
bool is_regular_entry(const fs::directory_entry& e) {
  std::error_code ec;
  return e.symlink_status(ec).type() == fs::file_type::regular && !ec;
}

}  // namespace

bool read_own_page_file(const fs::path& path, uint64_t page_bytes, std::string* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return false;
  Fd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (page_bytes != 0) {
    if (size > FileStorage::kHeaderBytes + page_bytes) return false;  // damaged: never copied
    std::array<char, FileStorage::kHeaderBytes> header{};
    if (size >= header.size() && read_exact(fd, header.data(), header.size(), 0) &&
        std::memcmp(header.data(), kMagic.data(), kMagic.size()) == 0 &&
        get_le<uint64_t>(header.data() + kLengthAt) == size - header.size() &&
        size - header.size() != page_bytes) {
      return false;  // a whole page of another geometry
    }
  }
  bytes->assign(static_cast<size_t>(size), '\0');
  return read_exact(fd, bytes->data(), bytes->size(), 0);
}

FileStorage::Entry FileStorage::classify(const fs::directory_entry& e) const {
  const std::string name = e.path().filename().string();
  if (!is_page_name(name)) return Entry::kOther;
  if (!is_regular_entry(e)) return Entry::kForeign;
  if (options_.page_bytes == 0) return Entry::kPage;
  const PageDigest key = from_hex(std::string_view(name).substr(0, kHexChars));
  int fd = -1;
  uint64_t length = 0;
  std::array<char, kHeaderBytes> header{};
  const Header h = open_page(e.path(), key, options_.page_bytes, &fd, &length, &header);
  if (h == Header::kOk) ::close(fd);
  return h == Header::kForeign ? Entry::kForeign : Entry::kPage;  // a damaged page is ours
}

FileStorage::FileStorage(fs::path dir, FileStorageOptions options)
    : dir_(std::move(dir)), options_(options) {
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) {
    error_ = os_error(errno);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    error_ = os_error(ENOTDIR);
    return;
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    error_ = os_error(errno);
    return;
  }
  ok_ = true;
  // Contract 4: stale temp files go; contract 5: pages found on disk join the recency order,
  // oldest file first (ties by name, so the order does not depend on directory order).
  const auto now = fs::file_time_type::clock::now();
  const auto stale = std::chrono::seconds(options_.stale_temp_seconds);
  std::vector<std::tuple<fs::file_time_type, std::string, uint64_t>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    const std::string name = it->path().filename().string();
    const bool page = is_page_name(name);
    if (page && classify(*it) != Entry::kPage) {
      ++foreign_at_start_;
      continue;
    }
    if ((!page && !is_temp_name(name)) || !is_regular_entry(*it)) continue;
    const fs::file_time_type mtime = it->last_write_time(file_ec);
    if (file_ec) continue;
    if (!page) {
      if (now - mtime > stale && fs::remove(it->path(), file_ec)) ++stale_temps_removed_;
      continue;
    }
    const uintmax_t size = it->file_size(file_ec);
    if (!file_ec) found.emplace_back(mtime, name, static_cast<uint64_t>(size));
  }
  std::sort(found.begin(), found.end());
  for (const auto& [mtime, name, size] : found)
    touch(from_hex(std::string_view(name).substr(0, kHexChars)), size);
}

fs::path FileStorage::path_of(const PageDigest& key) const {
  return dir_ / (to_hex(key) + std::string(kSuffix));
}

void FileStorage::touch(const PageDigest& key, uint64_t bytes) {
  auto [it, inserted] = known_.try_emplace(key);
  if (!inserted) {
    lru_.erase(it->second.last_use);
    known_bytes_ -= it->second.bytes;
  }
  it->second.bytes = bytes;
  it->second.last_use = ++clock_;
  known_bytes_ += bytes;
  lru_[it->second.last_use] = key;
}

void FileStorage::forget(const PageDigest& key) {
  auto it = known_.find(key);
  if (it == known_.end()) return;
  lru_.erase(it->second.last_use);
  known_bytes_ -= it->second.bytes;
  known_.erase(it);
}

bool FileStorage::exists(const PageDigest& key) {
  if (!ok_) return false;
  int fd = -1;
  uint64_t length = 0;
  std::array<char, kHeaderBytes> header{};
  if (open_page(path_of(key), key, options_.page_bytes, &fd, &length, &header) != Header::kOk) {
    return false;
  }
  ::close(fd);
  return true;
}

StorageStatus FileStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  KV_ASSERT(out != nullptr, "StorageBackend::get needs an output buffer");
  const StorageStatus status = read_page(key, out);
  if (status == StorageStatus::kOk) touch(key, kHeaderBytes + out->size());
  return status;
}

size_t FileStorage::scrub() {
  if (!ok_) return 0;
  std::vector<PageDigest> keys;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_page_name(name)) keys.push_back(from_hex(std::string_view(name).substr(0, kHexChars)));
  }
  std::sort(keys.begin(), keys.end());
  size_t removed = 0;
  std::vector<std::byte> payload;
  for (const PageDigest& key : keys) {
    if (read_page(key, &payload) == StorageStatus::kCorrupt) {
      remove(key);
      ++removed;
    }
  }
  return removed;
}

StorageStatus FileStorage::read_page(const PageDigest& key, std::vector<std::byte>* out) {
  if (!ok_) return StorageStatus::kMiss;
  int fd = -1;
  uint64_t length = 0;
  std::array<char, kHeaderBytes> header{};
  switch (open_page(path_of(key), key, options_.page_bytes, &fd, &length, &header)) {
    case Header::kOk:
      break;
    case Header::kMissing:
    case Header::kForeign:  // not this model's page: a miss, and left where it is
      forget(key);          // another process (or a person) removed it
      return StorageStatus::kMiss;
    case Header::kCorrupt:
      return StorageStatus::kCorrupt;
    case Header::kIoError:
      return StorageStatus::kIoError;
  }
  Fd guard(fd);
  std::vector<std::byte> payload(static_cast<size_t>(length));
  if (!read_exact(fd, reinterpret_cast<char*>(payload.data()), payload.size(),
                  static_cast<off_t>(kHeaderBytes))) {
    return errno == 0 ? StorageStatus::kCorrupt : StorageStatus::kIoError;
  }
  const Sha256Digest sum = Sha256::hash(as_u8(payload));
  if (std::memcmp(header.data() + kChecksumAt, sum.data(), sum.size()) != 0) {
    return StorageStatus::kCorrupt;
  }
  *out = std::move(payload);
  return StorageStatus::kOk;
}

StorageStatus FileStorage::write_file(const fs::path& tmp, std::span<const char> header,
                                      std::span<const std::byte> payload) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    note_write_error(errno);
    error_ = tmp.string() + ": " + os_error(errno);
    return StorageStatus::kIoError;
  }
  bool good = write_exact(fd, header.data(), header.size()) &&
              write_exact(fd, reinterpret_cast<const char*>(payload.data()), payload.size()) &&
              (!options_.durable || ::fsync(fd) == 0);
  const int write_errno = errno;
  good = ::close(fd) == 0 && good;
  if (!good) {
    note_write_error(write_errno != 0 ? write_errno : errno);
    error_ = tmp.string() + ": " + os_error(write_errno != 0 ? write_errno : errno);
    ::unlink(tmp.c_str());
    return StorageStatus::kIoError;
  }
  return StorageStatus::kOk;
}

StorageStatus FileStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (!ok_) return StorageStatus::kIoError;
  if (exists(key)) return StorageStatus::kOk;  // invariant 3 of storage_backend.h
  const uint64_t file_bytes = kHeaderBytes + payload.size();
  if (options_.capacity_bytes != 0) {
    if (file_bytes > options_.capacity_bytes) {
      error_ = "a page of " + std::to_string(file_bytes) + " bytes exceeds the budget of " +
               std::to_string(options_.capacity_bytes);
      return StorageStatus::kIoError;
    }
    forget(key);  // a damaged file under this name is about to be replaced
    while (known_bytes_ + file_bytes > options_.capacity_bytes && !lru_.empty()) {
      const PageDigest victim = lru_.begin()->second;
      KV_PROBE(store_file_budget_evicts);
      remove(victim);
      ++evictions_;
    }
  }
  std::array<char, kHeaderBytes> header{};
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  put_le<uint32_t>(header.data() + kVersionAt, kFormatVersion);
  put_le<uint64_t>(header.data() + kLengthAt, payload.size());
  const Sha256Digest sum = Sha256::hash(as_u8(payload));
  std::memcpy(header.data() + kChecksumAt, sum.data(), sum.size());
  std::memcpy(header.data() + kKeyAt, key.data(), key.size());

  const fs::path tmp = dir_ / (to_hex(key) + std::string(kTempInfix) + std::to_string(::getpid()) +
                               "." + std::to_string(++temp_counter_));
  if (write_file(tmp, header, payload) != StorageStatus::kOk) return StorageStatus::kIoError;
  const fs::path target = path_of(key);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    error_ = target.string() + ": " + os_error(errno);
    ::unlink(tmp.c_str());
    return StorageStatus::kIoError;
  }
  if (options_.durable) {
    // The rename is durable once the directory entry is: fsync the directory.
    const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dfd >= 0 && ::fsync(dfd) == 0;
    const int sync_errno = errno;
    if (dfd >= 0) ::close(dfd);
    if (!synced) {
      note_write_error(sync_errno);
      error_ = dir_.string() + ": " + os_error(sync_errno);
      return StorageStatus::kIoError;  // the page may or may not survive a crash
    }
  }
  touch(key, file_bytes);
  return StorageStatus::kOk;
}

void FileStorage::note_write_error(int err) {
  if (err == ENOSPC || err == EDQUOT) out_of_space_ = true;
}

void FileStorage::remove(const PageDigest& key) {
  forget(key);
  if (!ok_) return;
  std::error_code ec;
  fs::remove(path_of(key), ec);
}

size_t FileStorage::foreign_count() const {
  if (!ok_) return 0;
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
    n += classify(*it) == Entry::kForeign ? 1 : 0;
  return n;
}

size_t FileStorage::page_count() const {
  return static_cast<size_t>(usage().pages);
}

StorageBackend::Usage FileStorage::usage() const {
  Usage u;
  if (!ok_) return u;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (classify(*it) != Entry::kPage) continue;
    const uintmax_t size = it->file_size(file_ec);
    if (file_ec) continue;
    ++u.pages;
    u.bytes += static_cast<uint64_t>(size);
  }
  return u;
}

void FileStorage::clear() {
  if (!ok_) return;
  // Every entry under a page's name goes, whatever it is (another geometry's page, a FIFO, a
  // symlink: unlinked, never opened or followed), except a directory, which stays foreign.
  std::vector<fs::path> pages;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    const fs::file_type type = it->symlink_status(file_ec).type();
    if (is_page_name(it->path().filename().string()) && !file_ec &&
        type != fs::file_type::directory) {
      pages.push_back(it->path());
    }
  }
  for (const fs::path& p : pages)
    ::unlink(p.c_str());
  known_.clear();
  lru_.clear();
  known_bytes_ = 0;
}

}  // namespace kvsim
