// CallRecorder's files and buffers: opening a recording's two files (lines and the ".bin"
// sidecar), its header and footer, handing full buffers to the writer thread, and the
// synchronous and signal-time flushes (recorder.h, "Buffers and flushing").
#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "python/src/recorder.h"
#include "python/src/recorder_lines.h"
#include "sim/base/hex64.h"

namespace kvsim::python {

CallRecorder::CallRecorder(std::string path, int32_t page_size, EvictionPolicy policy,
                           uint64_t max_calls, std::optional<TreeSnapshot> first_snapshot)
    : page_size_(page_size),
      policy_(policy),
      page_(static_cast<size_t>(page_size)),
      max_calls_(max_calls) {
  hash_pages_ = page_size >= kHashPagesFrom;
  windowed_ = first_snapshot.has_value();
  const std::string error = open_files(path, &lines_fd_, &blob_fd_);
  if (!error.empty()) throw std::runtime_error(error);
  set_path(std::move(path));
  for (FileRegion* r : {&lines_, &plines_})
    r->grow(kLinesCap);
  for (FileRegion* r : {&blob_, &pblob_})
    r->grow(kBlobCap);
  write_header();
  if (first_snapshot) write_snapshot(std::move(*first_snapshot));
  commit();
  flush();
}

CallRecorder::~CallRecorder() {
  flush();
  {
    std::lock_guard<std::mutex> g(wmu_);
    stop_ = true;
  }
  wcv_.notify_all();
  if (writer_.joinable()) writer_.join();
  ::close(lines_fd_);
  ::close(blob_fd_);
}

void CallRecorder::violation(const std::string& detail, size_t nodes, int64_t evictable,
                             int64_t protected_size) {
  finish(nodes, evictable, protected_size, std::make_pair(segment_calls() - 1, detail), false);
}

void CallRecorder::finish(size_t nodes, int64_t evictable, int64_t protected_size,
                          std::optional<std::pair<size_t, std::string>> violation, bool truncated) {
  if (!active()) return;
  append_footer(nodes, evictable, protected_size, std::move(violation), truncated);
  commit(/*footer=*/true);
  ended_ = true;
  flush();
}

void CallRecorder::flush() {
  if (lines_fd_ < 0) return;
  std::unique_lock<std::mutex> g(wmu_);
  wcv_.wait(g, [&] { return !writing_.load(); });
  write_region(blob_fd_, blob_);
  write_region(lines_fd_, lines_);
  // A signal footer written past this end (the process survived the signal) goes.
  if (::ftruncate(lines_fd_, static_cast<off_t>(lines_.file_off + lines_.len)) != 0) {
    // the recording stops growing here, as on a full disk (pwrite_all)
  }
  blob_.restart();
  lines_.restart();
}

void CallRecorder::signal_flush(int sig) const {
  if (lines_fd_ < 0 || rotating_.load()) return;
  if (writing_.load()) {
    write_region(blob_fd_, pblob_);
    write_region(lines_fd_, plines_);
  }
  const uint64_t blob_end = commit_blob_.load(std::memory_order_acquire);
  const uint64_t lines_end = commit_lines_.load(std::memory_order_acquire);
  if (blob_end > blob_.file_off)
    pwrite_all(blob_fd_, blob_.data, blob_end - blob_.file_off, blob_.file_off);
  if (lines_end > lines_.file_off)
    pwrite_all(lines_fd_, lines_.data, lines_end - lines_.file_off, lines_.file_off);
  if (commit_footer_.load(std::memory_order_acquire)) return;  // it ends with its footer
  char footer[128];
  const size_t n = signal_footer(footer, commit_calls_.load(std::memory_order_acquire),
                                 commit_hash_.load(std::memory_order_acquire), sig);
  pwrite_all(lines_fd_, footer, n, lines_end);
}

// {"end":{"calls":C,"event_hash":"H","cut_by_signal":N}}\n into `out` (128 bytes), with no
// allocation (async-signal-safe); returns its length.
size_t CallRecorder::signal_footer(char* out, uint64_t calls, uint64_t hash, int sig) {
  size_t n = 0;
  auto text = [&](const char* s) {
    while (*s != '\0')
      out[n++] = *s++;
  };
  auto number = [&](uint64_t v) {
    char digits[20];
    size_t k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0)
      out[n++] = digits[--k];
  };
  text("{\"end\":{\"calls\":");
  number(calls);
  text(",\"event_hash\":\"");
  sim::hex64(hash, out + n);
  n += 16;
  text("\",\"cut_by_signal\":");
  number(static_cast<uint64_t>(sig));
  text("}}\n");
  return n;
}

std::string CallRecorder::open_files(const std::string& path, int* lines_fd, int* blob_fd) {
  *lines_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (*lines_fd < 0) return "cannot open recording file " + path;
  *blob_fd = ::open((path + ".bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (*blob_fd < 0) {
    ::close(*lines_fd);
    *lines_fd = -1;
    return "cannot open recording file " + path + ".bin";
  }
  return "";
}

void CallRecorder::set_path(std::string path) {
  path_ = std::move(path);
  blob_path_ = path_ + ".bin";
}

void CallRecorder::write_header() {
  nlohmann::json header =
      sim::call_trace_header(page_size_, policy_, "kvsim python module", sim::kSlotsHashLatest);
  const size_t slash = blob_path_.find_last_of('/');
  header["blob"] = slash == std::string::npos ? blob_path_ : blob_path_.substr(slash + 1);
  const std::string h = header.dump() + "\n";
  room(0);
  lines_.append(h.data(), h.size());
}

void CallRecorder::append_footer(size_t nodes, int64_t evictable, int64_t protected_size,
                                 std::optional<std::pair<size_t, std::string>> violation,
                                 bool truncated) {
  sim::CallTraceEnd end;
  end.calls = segment_calls();
  end.event_hash = hash_;
  end.nodes = nodes;
  end.evictable = evictable;
  end.protected_size = protected_size;
  end.violation = std::move(violation);
  end.truncated = truncated;
  const std::string f = sim::call_trace_footer(end).dump() + "\n";
  if (lines_.len + f.size() > lines_.cap) {
    hand_off();
    lines_.grow(f.size());
  }
  lines_.append(f.data(), f.size());
}

void CallRecorder::hand_off() {
  std::unique_lock<std::mutex> g(wmu_);
  wcv_.wait(g, [&] { return !writing_.load(); });
  if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
  blob_.swap(pblob_);
  lines_.swap(plines_);
  blob_.file_off = pblob_.file_off + pblob_.len;
  blob_.len = 0;
  lines_.file_off = plines_.file_off + plines_.len;
  lines_.len = 0;
  writing_.store(true);
  g.unlock();
  wcv_.notify_all();
}

void CallRecorder::writer_loop() {
  std::unique_lock<std::mutex> g(wmu_);
  for (;;) {
    wcv_.wait(g, [&] { return writing_.load() || stop_; });
    if (writing_.load()) {
      g.unlock();
      write_region(blob_fd_, pblob_);    // the sidecar first: a line never names bytes that
      write_region(lines_fd_, plines_);  // are not in the file yet
      g.lock();
      writing_.store(false);
      wcv_.notify_all();
    } else if (stop_) {
      return;
    }
  }
}

}  // namespace kvsim::python
