#include "sim/model/driver_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

extern char** environ;

namespace kvsim::sim {

std::string temp_stderr_path() {
  const char* dir = std::getenv("TMPDIR");
  std::string path =
      std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kvsim-driver-stderr-XXXXXX";
  std::vector<char> buf(path.begin(), path.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) throw DriverError("cannot create " + path + ": " + std::strerror(errno));
  close(fd);
  return std::string(buf.data());
}

std::vector<std::string> driver_environment(const std::vector<std::string>& python_path,
                                            const std::vector<std::string>& env_defaults) {
  // Ours, with python_path in front of PYTHONPATH (built here, not with setenv: hunts run units
  // on several threads).
  std::vector<std::string> env_strings;
  std::string pythonpath;
  for (const std::string& p : python_path) {
    if (!pythonpath.empty()) pythonpath += ":";
    pythonpath += p;
  }
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) == 0) {
      const std::string old = *e + 11;
      if (!old.empty()) pythonpath += (pythonpath.empty() ? "" : ":") + old;
      continue;
    }
    env_strings.emplace_back(*e);
  }
  if (!pythonpath.empty()) env_strings.push_back("PYTHONPATH=" + pythonpath);
  for (const std::string& d : env_defaults) {
    const std::string name = d.substr(0, d.find('=') + 1);
    const bool present =
        std::any_of(env_strings.begin(), env_strings.end(),
                    [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    if (!present) env_strings.push_back(d);
  }
  return env_strings;
}

std::optional<nlohmann::json> unix_socket_call(const std::string& path,
                                               const nlohmann::json& request, int timeout_s) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return std::nullopt;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const timeval tv{.tv_sec = timeout_s, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return std::nullopt;
  }
  const std::string line = request.dump() + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return std::nullopt;
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[4096];
  while (reply.find('\n') == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return std::nullopt;
    reply.append(buf, static_cast<size_t>(n));
  }
  nlohmann::json parsed = nlohmann::json::parse(reply.substr(0, reply.find('\n')), nullptr,
                                                /*allow_exceptions=*/false);
  if (!parsed.is_object()) return std::nullopt;
  return parsed;
}

DriverProcess::DriverProcess(const std::vector<std::string>& argv,
                             const std::vector<std::string>& python_path,
                             const std::vector<std::string>& env_defaults) {
  if (argv.empty()) throw DriverError("no driver command");
  // A driver that dies must not take kvsim with it: a write to its closed pipe is an error
  // (EPIPE, reported as a DriverError), not a SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  int in_pipe[2];   // parent writes, child reads
  int out_pipe[2];  // child writes, parent reads
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw DriverError(std::string("pipe: ") + std::strerror(errno));
  }
  stderr_path_ = temp_stderr_path();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(), O_WRONLY | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = driver_environment(python_path, env_defaults);
  std::vector<char*> envp;
  for (std::string& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    pid_ = -1;
    throw DriverError("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  to_child_ = fdopen(in_pipe[1], "w");
  from_child_ = fdopen(out_pipe[0], "r");
}

DriverProcess::DriverProcess(int to_child_fd, int from_child_fd, std::string stderr_path)
    : stderr_path_(std::move(stderr_path)), owns_stderr_(false) {
  to_child_ = fdopen(to_child_fd, "w");
  from_child_ = fdopen(from_child_fd, "r");
  if (to_child_ == nullptr || from_child_ == nullptr) {
    throw DriverError(std::string("fdopen: ") + std::strerror(errno));
  }
}

DriverProcess::~DriverProcess() {
  if (to_child_ != nullptr) fclose(to_child_);
  to_child_ = nullptr;
  reap(/*kill_it=*/false);
  if (from_child_ != nullptr) fclose(from_child_);
  if (owns_stderr_ && !stderr_path_.empty()) unlink(stderr_path_.c_str());
}

void DriverProcess::reap(bool kill_it) {
  if (pid_ <= 0) return;
  int status = 0;
  // The driver exits when its input closes; give it a moment, then stop it.
  for (int i = 0; i < 200 && !kill_it; ++i) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_ || done < 0) {
      pid_ = -1;
      return;
    }
    usleep(5000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void DriverProcess::send(const nlohmann::json& request) {
  if (to_child_ == nullptr) throw DriverError("the driver's input is closed");
  const std::string line = request.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), to_child_) != line.size() ||
      std::fflush(to_child_) != 0) {
    throw DriverError("the driver process stopped reading (it exited?)" +
                      std::string(stderr_tail().empty() ? "" : ": " + stderr_tail()));
  }
}

nlohmann::json DriverProcess::call(const nlohmann::json& request) {
  send(request);
  return read_reply(request.value("call", std::string("?")));
}

nlohmann::json DriverProcess::read_reply(const std::string& what) {
  line_.clear();
  for (int c; (c = std::fgetc(from_child_)) != EOF;) {
    if (c == '\n') break;
    line_.push_back(static_cast<char>(c));
  }
  if (line_.empty()) {
    reap(/*kill_it=*/false);
    std::string tail = stderr_tail();
    throw DriverError("the driver process exited without answering \"" + what + "\"" +
                      (tail.empty() ? "" : ":\n" + tail));
  }
  nlohmann::json reply = nlohmann::json::parse(line_, nullptr, /*allow_exceptions=*/false);
  if (!reply.is_object()) {
    throw DriverError("the driver answered \"" + what +
                      "\" with something that is not a JSON object: " + line_.substr(0, 200));
  }
  return reply;
}

std::string DriverProcess::stderr_tail(size_t max_bytes) const {
  std::ifstream in(stderr_path_, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s.size() > max_bytes ? "..." + s.substr(s.size() - max_bytes) : s;
}

}  // namespace kvsim::sim
