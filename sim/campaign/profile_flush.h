// Coverage profiles of forked hunt processes. A process built with clang's source-based
// coverage (the `coverage` preset) writes its profile at exit(); the hunt's worker processes end
// with _exit() (they share the parent's stdio) or are killed at the time budget, so without
// these calls the units they ran would be missing from a coverage figure (tools/coverage.sh
// --hunt). In any other build the profile runtime is absent and both are no-ops.
#pragma once

namespace kvsim::sim::profile_flush {

// In a freshly forked child: forget the counts inherited from the parent (the parent writes
// those itself), so each unit is counted once.
void forked_child();

// Writes (merges) the counts gathered since the last call into the process's profile and
// resets them: after each unit, so a worker killed later loses at most the unit it was in.
void write();

}  // namespace kvsim::sim::profile_flush
