#include "core/common/assert.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace kvsim {
namespace {

// __FILE__ is whatever path the compiler was handed: absolute in a plain build, "../../core/..."
// under ccache's base_dir, another root in the mutation runner's copy. A violation message is
// recorded in traces and compared on replay, so it names the file from the source root
// ("core/tree/full_component.cpp") however the build was set up.
std::string_view source_relative(const char* file) {
  std::string_view path(file);
#ifdef KVSIM_SOURCE_DIR
  constexpr std::string_view root = KVSIM_SOURCE_DIR "/";
  if (path.starts_with(root)) return path.substr(root.size());
#endif
  while (path.starts_with("./") || path.starts_with("../"))
    path.remove_prefix(path.find('/') + 1);
  return path;
}

void default_assert_handler(const char* expr, const char* file, int line, const std::string& msg) {
  const std::string_view path = source_relative(file);
  std::fprintf(stderr, "kvsim: assertion failed at %.*s:%d: %s: %s\n",
               static_cast<int>(path.size()), path.data(), line, expr, msg.c_str());
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
  throw AssertionFailure(std::string(source_relative(file)) + ":" + std::to_string(line) + ": " +
                         expr + ": " + msg);
}

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  g_handler(expr, file, line, msg);
  // A handler that returns is treated like the default: an invariant is broken, stop.
  std::abort();
}

}  // namespace kvsim
