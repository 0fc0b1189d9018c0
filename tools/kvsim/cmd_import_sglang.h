// kvsim import-sglang: runs the Python importer (python/kvsim/import_sglang.py, as a script)
// with the same arguments. The importer needs Debian's python3 and nothing else.
#pragma once

#include <string>
#include <vector>

namespace kvsim::tools {

// Replaces the process with `python3 import_sglang.py args...`; returns only on failure
// (exit code 2, with the reason on stderr).
int import_sglang_command(const std::vector<std::string>& args);

}  // namespace kvsim::tools
