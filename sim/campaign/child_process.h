// Child processes for work that may crash or hang the process running it: the shrinker's
// isolated replays and shrinks, the crash recorder, the hunt's workers and its shrink.
#pragma once

#include <sys/types.h>

#include <string>

namespace kvsim::sim {

// fork() after flushing stdout and stderr, so that the child does not write the parent's
// buffered output a second time. Returns what fork() returns.
pid_t fork_flushed();

// A child (fork_flushed) with a pipe from it to the parent. In the child (pid 0) `fd` is the
// pipe's write end; in the parent, its read end. The other end is closed on each side.
struct PipedChild {
  pid_t pid = -1;
  int fd = -1;
};
// Throws InputError "<who>: cannot create a pipe for <processes>" or "<who>: cannot start
// <processes>".
PipedChild fork_with_pipe(const std::string& who, const std::string& processes);

// waitpid(pid, &status, 0), retried across EINTR: the child's wait status.
int wait_for_child(pid_t pid);

}  // namespace kvsim::sim
