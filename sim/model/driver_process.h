// DriverProcess: a child process spoken to in JSON Lines over its standard input and output, one
// reply line per request line (docs/sglang-target-protocol.md). The SGLang target's driver runs
// in one, so SGLang's Python, its exceptions and its memory stay out of the simulator's process.
// Its standard error goes to a temporary file, kept for the failure report (stderr_tail()).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/json_reader.h"

namespace kvsim::sim {

class DriverProcess {
 public:
  // Starts `argv` (argv[0] is looked up on PATH when it has no '/') with this process's
  // environment, `python_path` put in front of PYTHONPATH. Throws DriverError when it cannot
  // start.
  // `env_defaults` ("NAME=value") are added where the environment has no NAME.
  DriverProcess(const std::vector<std::string>& argv, const std::vector<std::string>& python_path,
                const std::vector<std::string>& env_defaults = {});
  // A driver someone else started (a fork server's child, sim/model/sglang_cache.cpp): talks
  // over the two descriptors, which it owns; the process itself is not its to reap.
  DriverProcess(int to_child_fd, int from_child_fd, std::string stderr_path);
  ~DriverProcess();  // closes its input, waits briefly, then kills it
  DriverProcess(const DriverProcess&) = delete;
  DriverProcess& operator=(const DriverProcess&) = delete;

  // Sends one request and reads its reply. Throws DriverError when the process died or answered
  // something that is not one JSON object.
  nlohmann::json call(const nlohmann::json& request);
  // Sends a request that gets no reply (the protocol's "bye").
  void send(const nlohmann::json& request);
  // Reads one line that no request asked for (a server's greeting); `what` names it in errors.
  nlohmann::json read_reply(const std::string& what);
  // The last lines the process wrote to its standard error (for error messages).
  std::string stderr_tail(size_t max_bytes = 4000) const;
  const std::string& stderr_path() const { return stderr_path_; }
  bool alive() const { return to_child_ != nullptr && (pid_ > 0 || !owns_stderr_); }

 private:
  void reap(bool kill_it);
  pid_t pid_ = -1;
  FILE* to_child_ = nullptr;
  FILE* from_child_ = nullptr;
  std::string stderr_path_;
  bool owns_stderr_ = true;  // a fork server's child writes to the server's file
  std::string line_;
};

// The environment a driver is started with: this process's, `python_path` put in front of
// PYTHONPATH, `env_defaults` ("NAME=value") added where it has no NAME.
std::vector<std::string> driver_environment(const std::vector<std::string>& python_path,
                                            const std::vector<std::string>& env_defaults);
// A new empty file $TMPDIR/kvsim-driver-stderr-XXXXXX (the caller removes it).
std::string temp_stderr_path();
// One JSON line sent to the Unix socket at `path`, one JSON object line read back; nullopt when
// there is nothing to connect to, the peer goes away, answers no object, or takes over
// `timeout_s` for a read or a write.
std::optional<nlohmann::json> unix_socket_call(const std::string& path,
                                               const nlohmann::json& request, int timeout_s);

// The driver process failed: it could not start, died, or broke the protocol. Not a violation
// of the cache under test — the run stops as on bad input (exit 2), with the driver's message.
class DriverError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace kvsim::sim
