#include "sim/campaign/sweep.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "sim/base/json_reader.h"

namespace kvsim::sim {

Shard parse_shard(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InputError("--shard: \"" + text + "\": " + why);
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw bad("expected I/N (shard I of N, 0 <= I < N)");
  auto number = [&](const std::string& part, const char* what) {
    if (part.empty() || part.size() > 7 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      throw bad(std::string(what) + " must be a whole number from 0 to 1048576");
    }
    return static_cast<uint64_t>(std::stoull(part));
  };
  Shard s;
  s.index = number(text.substr(0, slash), "I");
  s.count = number(text.substr(slash + 1), "N");
  if (s.count == 0 || s.count > (uint64_t{1} << 20)) throw bad("N must be from 1 to 1048576");
  if (s.index >= s.count) throw bad("I must be less than N (shards are numbered from 0)");
  return s;
}

SeedRange::SeedRange(uint64_t first, uint64_t count, Shard shard) {
  if (count == 0) throw InputError("--seeds: must be at least 1");
  if (shard.count == 0 || shard.index >= shard.count) throw InputError("--shard: I must be < N");
  if (count - 1 > std::numeric_limits<uint64_t>::max() - first) {
    throw InputError("--seeds: " + std::to_string(count) + " seeds from " + std::to_string(first) +
                     " pass the largest seed " +
                     std::to_string(std::numeric_limits<uint64_t>::max()));
  }
  start_ = first + shard.index;
  step_ = shard.count;
  // Positions shard.index, shard.index + N, ... below count.
  size_ = shard.index < count ? (count - shard.index - 1) / shard.count + 1 : 0;
}

void run_indexed(uint64_t n, unsigned jobs, size_t window,
                 const std::function<void(uint64_t, size_t)>& work,
                 const std::function<bool(uint64_t, size_t)>& deliver) {
  if (window == 0) window = 1;
  if (jobs <= 1 || n <= 1) {
    for (uint64_t i = 0; i < n; ++i) {
      work(i, i % window);
      if (!deliver(i, i % window)) return;
    }
    return;
  }
  std::mutex m;
  std::condition_variable to_workers, to_consumer;
  uint64_t next_start = 0;
  uint64_t next_deliver = 0;
  bool stop = false;
  std::vector<char> done(window, 0);
  std::vector<std::exception_ptr> errors(window);

  auto worker = [&] {
    for (;;) {
      uint64_t i = 0;
      {
        std::unique_lock lock(m);
        to_workers.wait(
            lock, [&] { return stop || next_start >= n || next_start < next_deliver + window; });
        if (stop || next_start >= n) return;
        i = next_start++;
      }
      const size_t slot = i % window;
      std::exception_ptr error;
      try {
        work(i, slot);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(m);
        errors[slot] = error;
        done[slot] = 1;
      }
      to_consumer.notify_one();
    }
  };

  const uint64_t threads = std::min<uint64_t>(jobs, n);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  // Stops and joins the workers on every way out, exceptions included.
  struct Joiner {
    std::vector<std::thread>& pool;
    std::mutex& m;
    std::condition_variable& cv;
    bool& stop;
    ~Joiner() {
      {
        std::lock_guard lock(m);
        stop = true;
      }
      cv.notify_all();
      for (std::thread& t : pool)
        t.join();
    }
  } joiner{pool, m, to_workers, stop};
  for (uint64_t t = 0; t < threads; ++t)
    pool.emplace_back(worker);

  for (uint64_t i = 0; i < n; ++i) {
    const size_t slot = i % window;
    std::exception_ptr error;
    {
      std::unique_lock lock(m);
      to_consumer.wait(lock, [&] { return done[slot] != 0; });
      done[slot] = 0;
      error = errors[slot];
      errors[slot] = nullptr;
    }
    if (error) std::rethrow_exception(error);
    const bool more = deliver(i, slot);
    {
      std::lock_guard lock(m);
      next_deliver = i + 1;
      if (!more) stop = true;
    }
    to_workers.notify_all();
    if (!more) return;
  }
}

}  // namespace kvsim::sim
