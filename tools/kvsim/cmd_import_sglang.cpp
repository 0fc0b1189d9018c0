#include "tools/kvsim/cmd_import_sglang.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace kvsim::tools {
namespace {

namespace fs = std::filesystem;

// python/kvsim/import_sglang.py, run as a script (it needs the standard library only, not the
// compiled module that `import kvsim` loads).
constexpr const char* kScript = "import_sglang.py";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The importer: $KVSIM_IMPORT_SGLANG, else next to this binary (the build copies it to
// <bin>/import_sglang/), else an installed share/kvsim/, else the source tree this was built from.
std::string find_script() {
  if (const char* env = std::getenv("KVSIM_IMPORT_SGLANG"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path() / "import_sglang" / kScript);
    candidates.push_back(exe.parent_path() / ".." / "share" / "kvsim" / kScript);
  }
#ifdef KVSIM_SOURCE_DIR
  candidates.push_back(fs::path(KVSIM_SOURCE_DIR) / "python" / "kvsim" / kScript);
#endif
  for (const fs::path& p : candidates) {
    if (is_file(p)) return p.string();
  }
  return "";
}

}  // namespace

int import_sglang_command(const std::vector<std::string>& args) {
  const std::string script = find_script();
  if (script.empty()) {
    std::fprintf(stderr,
                 "kvsim: import-sglang: cannot find %s next to the kvsim binary "
                 "(import_sglang/%s) or in the source tree; set KVSIM_IMPORT_SGLANG to its path\n",
                 kScript, kScript);
    return 2;
  }
  // Debian's interpreter first: a `python3` on PATH may be a pyenv shim or a virtualenv. The
  // importer uses the standard library only.
  std::string python = "/usr/bin/python3";
  if (const char* env = std::getenv("KVSIM_PYTHON"); env != nullptr && *env != '\0') {
    python = env;
  }
  std::vector<std::string> argv_s{python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(python.c_str(), argv.data());
  const int first_errno = errno;
  if (python == "/usr/bin/python3") {  // not there: any python3 on PATH
    argv_s[0] = "python3";
    argv[0] = argv_s[0].data();
    execvp("python3", argv.data());
  }
  std::fprintf(stderr,
               "kvsim: import-sglang needs Python 3 (Debian: apt-get install python3): cannot run "
               "%s (%s)\n",
               python.c_str(), std::strerror(first_errno));
  return 2;
}

}  // namespace kvsim::tools
