#include "sim/campaign/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "sim/base/json_reader.h"

namespace kvsim::sim {

pid_t fork_flushed() {
  std::fflush(stdout);
  std::fflush(stderr);
  return ::fork();
}

PipedChild fork_with_pipe(const std::string& who, const std::string& processes) {
  int fds[2];
  if (::pipe(fds) != 0) throw InputError(who + ": cannot create a pipe for " + processes);
  const pid_t pid = fork_flushed();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw InputError(who + ": cannot start " + processes);
  }
  ::close(pid == 0 ? fds[0] : fds[1]);
  return PipedChild{pid, pid == 0 ? fds[1] : fds[0]};
}

int wait_for_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace kvsim::sim
