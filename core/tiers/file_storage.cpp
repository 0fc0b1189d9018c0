#include "core/tiers/file_storage.h"

#include <array>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "core/common/assert.h"
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

bool is_hex64(std::string_view s) {
  if (s.size() != kHexChars) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_page_name(std::string_view name) {
  return name.size() == kHexChars + kSuffix.size() && name.substr(kHexChars) == kSuffix &&
         is_hex64(name.substr(0, kHexChars));
}

bool is_temp_name(std::string_view name) {
  if (name.size() <= kHexChars + kTempInfix.size()) return false;
  if (!is_hex64(name.substr(0, kHexChars))) return false;
  if (name.substr(kHexChars, kTempInfix.size()) != kTempInfix) return false;
  for (char c : name.substr(kHexChars + kTempInfix.size())) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::span<const uint8_t> as_u8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

}  // namespace

FileStorage::FileStorage(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  ok_ = !ec && fs::is_directory(dir_, ec);
  if (!ok_) return;
  // Invariant 4: remove temp files an interrupted set() left behind. Failures are ignored (the
  // files are never read as pages anyway).
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (is_temp_name(it->path().filename().string()) && it->is_regular_file(file_ec)) {
      fs::remove(it->path(), file_ec);
    }
  }
}

fs::path FileStorage::path_of(const PageDigest& key) const {
  return dir_ / (to_hex(key) + std::string(kSuffix));
}

bool FileStorage::exists(const PageDigest& key) {
  std::error_code ec;
  return fs::is_regular_file(path_of(key), ec);
}

StorageStatus FileStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  KV_ASSERT(out != nullptr, "StorageBackend::get needs an output buffer");
  const fs::path path = path_of(key);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return StorageStatus::kMiss;
  if (ec) return StorageStatus::kIoError;
  if (st.type() != fs::file_type::regular) return StorageStatus::kCorrupt;  // e.g. a directory
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return StorageStatus::kIoError;
  if (size < kHeaderBytes) return StorageStatus::kCorrupt;  // includes the zero-length file

  std::ifstream in(path, std::ios::binary);
  if (!in) return StorageStatus::kIoError;
  std::array<char, kHeaderBytes> header{};
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  if (in.gcount() != static_cast<std::streamsize>(header.size())) {
    return in.bad() ? StorageStatus::kIoError : StorageStatus::kCorrupt;
  }
  if (std::memcmp(header.data(), kMagic.data(), kMagic.size()) != 0) {
    return StorageStatus::kCorrupt;
  }
  if (get_le<uint32_t>(header.data() + kVersionAt) != kFormatVersion) {
    return StorageStatus::kCorrupt;
  }
  // The length must match the real file: a truncated or extended file is corrupt. Checking it
  // before allocating means a forged length cannot make us allocate more than the file holds.
  const uint64_t length = get_le<uint64_t>(header.data() + kLengthAt);
  if (length != size - kHeaderBytes) return StorageStatus::kCorrupt;
  if (std::memcmp(header.data() + kKeyAt, key.data(), key.size()) != 0) {
    return StorageStatus::kCorrupt;  // another page's file under this name
  }
  std::vector<std::byte> payload(static_cast<size_t>(length));
  in.read(reinterpret_cast<char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
  if (in.gcount() != static_cast<std::streamsize>(payload.size())) {
    return in.bad() ? StorageStatus::kIoError : StorageStatus::kCorrupt;
  }
  const Sha256Digest sum = Sha256::hash(as_u8(payload));
  if (std::memcmp(header.data() + kChecksumAt, sum.data(), sum.size()) != 0) {
    return StorageStatus::kCorrupt;
  }
  *out = std::move(payload);
  return StorageStatus::kOk;
}

StorageStatus FileStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (!ok_) return StorageStatus::kIoError;
  if (exists(key)) return StorageStatus::kOk;  // invariant 3 of storage_backend.h
  std::array<char, kHeaderBytes> header{};
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  put_le<uint32_t>(header.data() + kVersionAt, kFormatVersion);
  put_le<uint64_t>(header.data() + kLengthAt, payload.size());
  const Sha256Digest sum = Sha256::hash(as_u8(payload));
  std::memcpy(header.data() + kChecksumAt, sum.data(), sum.size());
  std::memcpy(header.data() + kKeyAt, key.data(), key.size());

  const fs::path tmp =
      dir_ / (to_hex(key) + std::string(kTempInfix) + std::to_string(++temp_counter_));
  std::error_code ec;
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    if (o) {
      o.write(header.data(), static_cast<std::streamsize>(header.size()));
      o.write(reinterpret_cast<const char*>(payload.data()),
              static_cast<std::streamsize>(payload.size()));
      o.close();  // flushes; a failing flush sets failbit
    }
    if (!o) {
      fs::remove(tmp, ec);
      return StorageStatus::kIoError;
    }
  }
  fs::rename(tmp, path_of(key), ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return StorageStatus::kIoError;
  }
  return StorageStatus::kOk;
}

void FileStorage::remove(const PageDigest& key) {
  std::error_code ec;
  fs::remove(path_of(key), ec);
}

size_t FileStorage::page_count() const {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (is_page_name(it->path().filename().string()) && it->is_regular_file(file_ec)) ++n;
  }
  return n;
}

}  // namespace kvsim
