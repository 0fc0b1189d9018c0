// The process-wide tables of recordings: the trees with an open recording (closed at
// interpreter exit by kvsim/__init__.py's atexit hook, flushed by kvsim.flush_recordings()),
// and the recorders a SIGTERM / SIGABRT handler flushes (CallRecorder::signal_flush()).
#pragma once

#include "python/src/recorder.h"

namespace kvsim::python {

class PyTree;

// Trees with an open recording.
void add_open_recording(PyTree* tree);
void remove_open_recording(PyTree* tree);
// Ends every open recording with its footer (PyTree::close_recording, outside the table's lock).
void close_open_recordings();
// Writes every open recording's buffered calls to its files.
void flush_open_recordings();

// Installs the SIGTERM / SIGABRT handler, once, when the first recording starts
// (KVSIM_RECORD_SIGNALS=0: not at all). It flushes the watched recorders, then does what would
// have happened without kvsim (the previous handler, or the default action).
void install_signal_flush();
void watch_on_signal(CallRecorder* r);
void unwatch_on_signal(CallRecorder* r);

}  // namespace kvsim::python
