#include "fuzz/fuzz_support.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <nlohmann/json.hpp>

#include "sim/campaign/shrink.h"

namespace kvsim::fuzz {
namespace {

std::string& artifact_dir() {
  static std::string dir;
  return dir;
}

uint32_t rotl(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

void sha1_block(std::array<uint32_t, 5>& h, const uint8_t* block) {
  std::array<uint32_t, 80> w{};
  for (int i = 0; i < 16; ++i) {
    w[i] = uint32_t{block[4 * i]} << 24 | uint32_t{block[4 * i + 1]} << 16 |
           uint32_t{block[4 * i + 2]} << 8 | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 80; ++i)
    w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; ++i) {
    uint32_t f = 0, k = 0;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6;
    }
    const uint32_t t = rotl(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rotl(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace

void init_trace_dir(int argc, char** argv) {
  static const char kFlag[] = "-artifact_prefix=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kFlag, sizeof kFlag - 1) != 0) continue;
    const std::string prefix = argv[i] + sizeof kFlag - 1;
    const size_t slash = prefix.rfind('/');
    // "out/" and "out/crash-" both mean the folder "out"; "crash-" means the current one.
    artifact_dir() = slash == std::string::npos ? "." : prefix.substr(0, slash + 1);
  }
}

std::string trace_dir() {
  if (!artifact_dir().empty()) return artifact_dir();
  if (const char* env = std::getenv("KVSIM_FUZZ_TRACE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return ".";
}

std::string sha1_hex(const uint8_t* data, size_t size) {
  std::array<uint32_t, 5> h = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  size_t done = 0;
  for (; done + 64 <= size; done += 64)
    sha1_block(h, data + done);
  // The tail, the 0x80 marker and the bit length, in one or two final blocks.
  std::array<uint8_t, 128> tail{};
  const size_t rest = size - done;
  if (rest > 0) std::memcpy(tail.data(), data + done, rest);
  tail[rest] = 0x80;
  const size_t blocks = rest + 9 <= 64 ? 1 : 2;
  const uint64_t bits = static_cast<uint64_t>(size) * 8;
  for (int i = 0; i < 8; ++i)
    tail[blocks * 64 - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  for (size_t b = 0; b < blocks; ++b)
    sha1_block(h, tail.data() + 64 * b);
  char out[41];
  for (int i = 0; i < 5; ++i)
    std::snprintf(out + 8 * i, 9, "%08x", h[i]);
  return std::string(out, 40);
}

void report_violation(const char* target, const uint8_t* data, size_t size,
                      const sim::OpTrace& trace, const sim::WorkloadTrace* workload) {
  std::string dir = trace_dir();
  if (dir.back() != '/') dir += '/';
  const std::string stem = dir + "kvsim-" + target + "-" + sha1_hex(data, size);
  const sim::SimViolation& v = *trace.violation;
  std::fprintf(stderr, "\n==kvsim== %s: violation %s after op %zu of %zu: %s\n", target,
               v.invariant.c_str(), v.op_index, trace.ops.size(), v.detail.c_str());
  try {
    // Only the ops that applied, with their hash chain: what `kvsim replay` accepts.
    sim::write_op_trace(stem + ".trace.jsonl", sim::strict_trace(trace));
    std::fprintf(stderr, "==kvsim== op trace: %s.trace.jsonl\n", stem.c_str());
    if (workload != nullptr) {
      sim::write_workload_trace(stem + ".workload.jsonl", *workload);
      std::fprintf(stderr, "==kvsim== workload trace (replays through the scheduler): %s\n",
                   (stem + ".workload.jsonl").c_str());
    }
    std::fprintf(stderr, "==kvsim== replay:   kvsim replay %s.trace.jsonl\n", stem.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "==kvsim== could not write the trace: %s\n", e.what());
  }
  std::fflush(stderr);
  std::abort();
}

void report_property(const char* target, const std::string& what) {
  std::fprintf(stderr, "\n==kvsim== %s: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool strict() {
  static const bool on = [] {
    const char* env = std::getenv("KVSIM_FUZZ_STRICT");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }();
  return on;
}

bool known_json_number_overflow(const std::exception& e) {
  const auto* range = dynamic_cast<const nlohmann::json::out_of_range*>(&e);
  return !strict() && range != nullptr && range->id == 406;
}

}  // namespace kvsim::fuzz

// libFuzzer calls this once with its command line (the standalone main does too).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  kvsim::fuzz::init_trace_dir(*argc, *argv);
  return 0;
}
