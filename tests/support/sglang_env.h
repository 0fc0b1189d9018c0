// Whether a test can run SGLang's own cache (the SGLang target): the bundle of SGLang's source
// beside the checkout (../shared/sglang) and Debian's torch. Tests that need them skip cleanly
// with the reason this returns; empty when both are there. Needs KVSIM_SOURCE_DIR (the test
// target's compile definition).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvsim::testing {

inline std::string sglang_skip_reason() {
  const std::filesystem::path bundle =
      std::filesystem::path(KVSIM_SOURCE_DIR) / ".." / "shared" / "sglang" / "sglang-slice.bundle";
  if (!std::filesystem::exists(bundle)) return "no SGLang bundle at " + bundle.string();
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    return "/usr/bin/python3 has no torch (apt install python3-torch)";
  }
  return "";
}

}  // namespace kvsim::testing
