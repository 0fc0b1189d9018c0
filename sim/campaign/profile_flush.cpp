#include "sim/campaign/profile_flush.h"

// The profile runtime's hooks (compiler-rt's InstrProfiling*.c). Weak: null unless the binary
// links the runtime, which -fprofile-instr-generate does.
extern "C" {
int __llvm_profile_write_file(void) __attribute__((weak));
void __llvm_profile_reset_counters(void) __attribute__((weak));
}

namespace kvsim::sim::profile_flush {

void forked_child() {
  if (__llvm_profile_reset_counters != nullptr) __llvm_profile_reset_counters();
}

void write() {
  if (__llvm_profile_write_file == nullptr || __llvm_profile_reset_counters == nullptr) return;
  // The raw file name must merge (LLVM_PROFILE_FILE with %m): a plain name is overwritten by
  // each write, keeping the last unit only. tools/coverage.sh sets %p-%m.
  __llvm_profile_write_file();
  __llvm_profile_reset_counters();
}

}  // namespace kvsim::sim::profile_flush
