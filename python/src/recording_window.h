// RecordingWindow: when a windowed recording (record_window=N calls and/or
// record_window_seconds=S) starts its next segment, what the segments are called, and deleting
// all but the last two, so the files on disk always hold the last N to 2N calls (or the last S
// to 2S seconds of them). Wall time only picks segment boundaries; it never enters a trace.
//
// Names: the recording's path "dir/x.jsonl" gives the segments "dir/x.seg000000.jsonl",
// "dir/x.seg000001.jsonl", ... (each with its ".bin" sidecar).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kvsim::python {

class RecordingWindow {
 public:
  RecordingWindow(std::string path, uint64_t calls, double seconds)
      : stem_(path.substr(0, path.size() - 6)),  // without ".jsonl"
        calls_(calls),
        seconds_(seconds),
        started_(std::chrono::steady_clock::now()) {}

  std::string segment_path(uint64_t k) const {
    char number[32];
    std::snprintf(number, sizeof number, ".seg%06llu.jsonl", static_cast<unsigned long long>(k));
    return stem_ + number;
  }
  uint64_t segment() const { return segment_; }
  std::string current_path() const { return segment_path(segment_); }
  std::string next_path() const { return segment_path(segment_ + 1); }

  // Whether the segment that holds `calls` calls so far is full (checked after each call).
  bool due(uint64_t calls) const {
    if (calls_ != 0 && calls >= calls_) return true;
    if (seconds_ <= 0 || calls == 0) return false;
    const std::chrono::duration<double> age = std::chrono::steady_clock::now() - started_;
    return age.count() >= seconds_;
  }

  // The next segment has started: delete the one before the previous.
  void started_next() {
    ++segment_;
    started_ = std::chrono::steady_clock::now();
    if (segment_ >= 2) {
      const std::string old = segment_path(segment_ - 2);
      ::unlink(old.c_str());
      ::unlink((old + ".bin").c_str());
    }
  }

  // The segments on disk, oldest first.
  std::vector<std::string> live() const {
    std::vector<std::string> out;
    if (segment_ >= 1) out.push_back(segment_path(segment_ - 1));
    out.push_back(segment_path(segment_));
    return out;
  }

 private:
  std::string stem_;
  uint64_t calls_ = 0;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point started_;
  uint64_t segment_ = 0;
};

}  // namespace kvsim::python
