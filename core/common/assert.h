// Two-tier assertions for the kvsim core (TigerBeetle style).
//
//   KV_ASSERT(cond, msg)  always on, O(1). A broken invariant is a programmer error.
//   KV_VERIFY(cond, msg)  gated by kvsim::kVerify (on in debug, sim and fuzz builds); may be O(n).
//
// A failure calls the installed AssertHandler. The default handler prints the failure and
// aborts. Tests and the simulator install a handler that throws AssertionFailure, so a failed
// core assertion becomes a reportable, replayable event instead of a dead process.
#pragma once

#include <stdexcept>
#include <string>

namespace kvsim {

#ifndef KVSIM_VERIFY
#define KVSIM_VERIFY 1
#endif
inline constexpr bool kVerify = KVSIM_VERIFY != 0;

// Thrown by the throwing handler; what() holds "file:line: expr: message".
class AssertionFailure : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

using AssertHandler = void (*)(const char* expr, const char* file, int line,
                               const std::string& msg);

// Installs `handler` for the calling thread (nullptr restores the default abort handler);
// returns the previous one. Each thread starts with the default handler.
AssertHandler set_assert_handler(AssertHandler handler);

// The handler that throws AssertionFailure.
void throwing_assert_handler(const char* expr, const char* file, int line, const std::string& msg);

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);

// RAII: installs the throwing handler for a scope (tests, simulator steps).
class ScopedThrowingAsserts {
 public:
  ScopedThrowingAsserts() : previous_(set_assert_handler(&throwing_assert_handler)) {}
  ~ScopedThrowingAsserts() { set_assert_handler(previous_); }
  ScopedThrowingAsserts(const ScopedThrowingAsserts&) = delete;
  ScopedThrowingAsserts& operator=(const ScopedThrowingAsserts&) = delete;

 private:
  AssertHandler previous_;
};

}  // namespace kvsim

#define KV_ASSERT(cond, msg)                                             \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      ::kvsim::assert_fail(#cond, __FILE__, __LINE__, std::string(msg)); \
    }                                                                    \
  } while (0)

#define KV_VERIFY(cond, msg)          \
  do {                                \
    if constexpr (::kvsim::kVerify) { \
      KV_ASSERT(cond, msg);           \
    }                                 \
  } while (0)
