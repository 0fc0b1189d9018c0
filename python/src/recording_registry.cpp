// The process-wide tables of recordings (recording_registry.h).
#include "python/src/recording_registry.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "python/src/py_tree.h"

namespace kvsim::python {
namespace {

// The recorders a SIGTERM / SIGABRT handler flushes: a fixed table of atomic pointers, so the
// handler takes no lock and allocates nothing (recorder.h, signal_flush()). A process with more
// than kSignalSlots recording trees at once flushes only the first ones on a signal.
constexpr size_t kSignalSlots = 256;
std::atomic<CallRecorder*> g_signal_recorders[kSignalSlots];
struct sigaction g_previous_term;
struct sigaction g_previous_abrt;
std::once_flag g_signals_once;

extern "C" void kvsim_flush_on_signal(int sig, siginfo_t* info, void* context) {
  for (auto& slot : g_signal_recorders) {
    if (CallRecorder* r = slot.load()) r->signal_flush(sig);
  }
  // Then what would have happened without kvsim: the previous handler, or the default action.
  const struct sigaction& prev = sig == SIGTERM ? g_previous_term : g_previous_abrt;
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler == SIG_DFL) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // blocked until this handler returns, then the default action
    return;
  }
  prev.sa_handler(sig);
}

// Trees with an open recording.
std::mutex g_recording_mu;
std::set<PyTree*> g_recording;

}  // namespace

void install_signal_flush() {
  std::call_once(g_signals_once, [] {
    if (const char* env = std::getenv("KVSIM_RECORD_SIGNALS"); env != nullptr && env[0] == '0')
      return;
    struct sigaction sa {};
    sa.sa_sigaction = &kvsim_flush_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_previous_term);
    sigaction(SIGABRT, &sa, &g_previous_abrt);
  });
}
void watch_on_signal(CallRecorder* r) {
  for (auto& slot : g_signal_recorders) {
    CallRecorder* empty = nullptr;
    if (slot.compare_exchange_strong(empty, r)) return;
  }
}
void unwatch_on_signal(CallRecorder* r) {
  for (auto& slot : g_signal_recorders) {
    CallRecorder* mine = r;
    if (slot.compare_exchange_strong(mine, nullptr)) return;
  }
}

void add_open_recording(PyTree* tree) {
  std::lock_guard<std::mutex> g(g_recording_mu);
  g_recording.insert(tree);
}
void remove_open_recording(PyTree* tree) {
  std::lock_guard<std::mutex> g(g_recording_mu);
  g_recording.erase(tree);
}
void close_open_recordings() {
  std::vector<PyTree*> trees;
  {
    std::lock_guard<std::mutex> g(g_recording_mu);
    trees.assign(g_recording.begin(), g_recording.end());
  }
  for (PyTree* t : trees)
    t->close_recording();
}
void flush_open_recordings() {
  std::lock_guard<std::mutex> g(g_recording_mu);
  for (PyTree* t : g_recording)
    t->flush_recording();
}

}  // namespace kvsim::python
