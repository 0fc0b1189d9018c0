// FileRegion: one of the recorder's fixed buffers (lines or sidecar bytes), bound to the file
// offset its first byte goes to, and the pwrite() loop that writes one (async-signal-safe: the
// SIGTERM / SIGABRT flush uses it). See recorder.h, "Buffers and flushing".
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kvsim::python {

// A buffer bound to a file offset; it grows only at a call boundary (CallRecorder::room()).
struct FileRegion {
  char* data = nullptr;
  size_t len = 0;
  size_t cap = 0;
  uint64_t file_off = 0;  // where data[0] goes in the file
  FileRegion() = default;
  FileRegion(const FileRegion&) = delete;
  FileRegion& operator=(const FileRegion&) = delete;
  ~FileRegion() { std::free(data); }
  void swap(FileRegion& o) {
    std::swap(data, o.data);
    std::swap(len, o.len);
    std::swap(cap, o.cap);
    std::swap(file_off, o.file_off);
  }
  void grow(size_t want) {
    if (want <= cap) return;
    char* p = static_cast<char*>(std::malloc(want));
    if (p == nullptr) throw std::bad_alloc();
    if (len != 0) std::memcpy(p, data, len);
    // Touched now, so that no call pays for the first write to a page of it.
    std::memset(p + len, 0, want - len);
    std::free(data);
    data = p;
    cap = want;
  }
  void append(const void* p, size_t n) {
    std::memcpy(data + len, p, n);
    len += n;
  }
  void restart() {
    file_off += len;
    len = 0;
  }
};

inline void pwrite_all(int fd, const char* p, size_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // disk full or closed: the recording stops growing
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
}
inline void write_region(int fd, const FileRegion& r) {
  if (r.len != 0) pwrite_all(fd, r.data, r.len, r.file_off);
}

}  // namespace kvsim::python
