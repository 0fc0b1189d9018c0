// CallRecorder's appends to the line being written and to the sidecar, defined inline for the
// recorder's .cpp files only (every recorded call makes several; not part of the interface).
#pragma once

#include <atomic>
#include <charconv>
#include <cstring>

#include "python/src/recorder.h"

namespace kvsim::python {

// The end of the last complete call, as file offsets (read by signal_flush()), with the calls
// and event hash a signal footer states; `footer`: what is committed ends with a footer.
inline void CallRecorder::commit(bool footer) {
  commit_calls_.store(segment_calls(), std::memory_order_relaxed);
  commit_hash_.store(hash_, std::memory_order_relaxed);
  commit_footer_.store(footer, std::memory_order_relaxed);
  // Release: a signal_flush() that acquires an offset sees the bytes before it (a plain
  // seq_cst store is an xchg, paid at every call).
  commit_blob_.store(blob_.file_off + blob_.len, std::memory_order_release);
  commit_lines_.store(lines_.file_off + lines_.len, std::memory_order_release);
}

// At a call boundary: makes room for a call of at most `blob_bytes` sidecar bytes (and a
// line of at most 256 + a few bytes), handing full buffers to the writer thread.
inline void CallRecorder::room(size_t blob_bytes) {
  constexpr size_t kLine = 512;
  if (lines_.len + kLine <= lines_.cap && blob_.len + blob_bytes <= blob_.cap) return;
  hand_off();
  lines_.grow(kLine);
  blob_.grow(blob_bytes);  // a key larger than the buffer: this buffer grows once
}

inline void CallRecorder::mark() {
  mark_lines_ = lines_.len;
  mark_blob_ = blob_.len;
}

// Appends `count` items (runs: pairs) to the sidecar and writes [offset,count] in the line.
template <typename T>
void CallRecorder::blob_ref(const T* data, size_t count, size_t items_per_count) {
  text("[");
  num(blob_.file_off + blob_.len);
  text(",");
  num(count);
  text("]");
  blob_.append(data, count * items_per_count * sizeof(T));
}

inline void CallRecorder::text(const char* s) {
  lines_.append(s, std::strlen(s));
}

template <typename T>
void CallRecorder::num(T v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  lines_.append(tmp, static_cast<size_t>(r.ptr - tmp));
}

}  // namespace kvsim::python
