#include "core/tiers/file_storage.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/tiers/page_hash.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

constexpr std::array<char, 8> kMagic = {'K', 'V', 'S', 'I', 'M', 'P', 'G', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 32 + 32;
constexpr const char* kSuffix = ".kvpage";

template <typename T>
void put_le(std::vector<char>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename T>
T get_le(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

FileStorage::FileStorage(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  ok_ = !ec && std::filesystem::is_directory(dir_, ec);
  if (!ok_) return;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
}

std::filesystem::path FileStorage::path_of(const PageDigest& key) const {
  return dir_ / (to_hex(key) + kSuffix);
}

bool FileStorage::exists(const PageDigest& key) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path_of(key), ec);
}

StorageStatus FileStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  std::ifstream in(path_of(key), std::ios::binary);
  if (!in) return exists(key) ? StorageStatus::kIoError : StorageStatus::kMiss;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return StorageStatus::kIoError;
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0 ||
      get_le<uint32_t>(bytes.data() + 8) != kFormatVersion) {
    return StorageStatus::kCorrupt;
  }
  const auto length = get_le<uint64_t>(bytes.data() + 12);
  if (length != bytes.size() - kHeaderBytes) return StorageStatus::kCorrupt;  // truncated
  if (std::memcmp(bytes.data() + 20 + 32, key.data(), key.size()) != 0) {
    return StorageStatus::kCorrupt;  // a file under another page's name
  }
  const auto* payload = reinterpret_cast<const uint8_t*>(bytes.data() + kHeaderBytes);
  const Sha256Digest sum = Sha256::hash({payload, static_cast<size_t>(length)});
  if (std::memcmp(bytes.data() + 20, sum.data(), sum.size()) != 0) return StorageStatus::kCorrupt;
  out->resize(static_cast<size_t>(length));
  std::memcpy(out->data(), payload, static_cast<size_t>(length));
  return StorageStatus::kOk;
}

StorageStatus FileStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (!ok_) return StorageStatus::kIoError;
  if (exists(key)) return StorageStatus::kOk;
  std::vector<char> file(kMagic.begin(), kMagic.end());
  put_le<uint32_t>(file, kFormatVersion);
  put_le<uint64_t>(file, payload.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(payload.data());
  const Sha256Digest sum = Sha256::hash({bytes, payload.size()});
  file.insert(file.end(), sum.begin(), sum.end());
  file.insert(file.end(), key.begin(), key.end());
  file.insert(file.end(), reinterpret_cast<const char*>(bytes),
              reinterpret_cast<const char*>(bytes) + payload.size());
  const std::filesystem::path tmp =
      dir_ / (to_hex(key) + ".tmp." + std::to_string(++temp_counter_));
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!o) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return StorageStatus::kIoError;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_of(key), ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return StorageStatus::kIoError;
  }
  return StorageStatus::kOk;
}

void FileStorage::remove(const PageDigest& key) {
  std::error_code ec;
  std::filesystem::remove(path_of(key), ec);
}

size_t FileStorage::page_count() const {
  size_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().extension() == kSuffix) ++n;
  }
  return n;
}

}  // namespace kvsim
