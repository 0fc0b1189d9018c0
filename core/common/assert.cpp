#include "core/common/assert.h"

#include <cstdio>
#include <cstdlib>

namespace kvsim {
namespace {

void default_assert_handler(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "kvsim: assertion failed at %s:%d: %s: %s\n", file, line, expr, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

// Per thread: sweeps run seeds on worker threads, each installing its own handler around its
// simulated steps (ScopedThrowingAsserts), which must not leak into another thread's run.
thread_local AssertHandler g_handler = &default_assert_handler;

}  // namespace

AssertHandler set_assert_handler(AssertHandler handler) {
  AssertHandler previous = g_handler;
  g_handler = handler != nullptr ? handler : &default_assert_handler;
  return previous;
}

void throwing_assert_handler(const char* expr, const char* file, int line, const std::string& msg) {
  throw AssertionFailure(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + msg);
}

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  g_handler(expr, file, line, msg);
  // A handler that returns is treated like the default: an invariant is broken, stop.
  std::abort();
}

}  // namespace kvsim
