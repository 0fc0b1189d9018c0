// Deterministic randomness for the simulator: one 64-bit seed, split into independent
// streams per subsystem (workload, scheduler, GPU progress, faults, storage), so that changing
// how often one subsystem draws never shifts the choices of another (FoundationDB's rule).
//
// SplitMix64 is fully specified here; std:: distributions are not (their output differs
// between standard libraries), so every draw goes through below() / chance().
#pragma once

#include <cstdint>
#include <string_view>

namespace kvsim::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Rng(r.state()) continues exactly where r is (prompt recipes store generated text so).
  uint64_t state() const { return state_; }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0. (Modulo bias is irrelevant at these ranges.)
  uint64_t below(uint64_t n) { return next() % n; }
  // Uniform in [lo, hi].
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1)));
  }
  // True with probability p (resolution 2^-32).
  bool chance(double p) { return static_cast<double>(next() >> 32) < p * 4294967296.0; }

 private:
  uint64_t state_;
};

// The stream named `name` of `seed`: independent of every other name.
inline Rng rng_stream(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name)
    h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  Rng mix(seed ^ h);
  return Rng(mix.next());
}

}  // namespace kvsim::sim
