// The module's functions over every open recording, for kvsim/__init__.py: the atexit hook
// that closes them and kvsim.flush_recordings().
#include "python/src/bindings.h"
#include "python/src/recording_registry.h"

namespace kvsim::python {

void bind_recording(pybind11::module_& m) {
  m.def(
      "_close_recordings", [] { close_open_recordings(); },
      "Ends every open recording (called at interpreter exit)");
  m.def(
      "_flush_recordings", [] { flush_open_recordings(); },
      "Writes every recording's buffered calls to its file");
}

}  // namespace kvsim::python
