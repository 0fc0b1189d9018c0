// kvsim.RadixTree: PyTree's methods and properties, with their argument names, defaults and
// docstrings (docs/sglang.md, "The Python module").
#include "python/src/bindings.h"
#include "python/src/py_tree.h"

namespace py = pybind11;

namespace kvsim::python {

void bind_radix_tree(py::module_& m) {
  py::class_<PyTree>(m, "RadixTree",
                     "kvsim's page-aligned radix tree; slots are the caller's (device tier).")
      .def(py::init<int32_t, const std::string&, py::object, uint64_t, uint64_t, double>(),
           py::arg("page_size") = 1, py::arg("eviction_policy") = "lru",
           py::arg("record") = py::none(), py::arg("record_max_calls") = 0,
           py::arg("record_window") = 0, py::arg("record_window_seconds") = 0.0,
           "record: a directory (one file per tree) or a .jsonl path; None reads KVSIM_RECORD.\n"
           "record_max_calls: keep the first N calls (KVSIM_RECORD_MAX_CALLS).\n"
           "record_window / record_window_seconds: keep the last N..2N calls / S..2S seconds in\n"
           "rotating segment files, each starting with a tree snapshot (KVSIM_RECORD_WINDOW,\n"
           "KVSIM_RECORD_WINDOW_SECONDS)")
      .def_property_readonly("recording_path", &PyTree::recording_path,
                             "the file being written (a window's current segment)")
      .def_property_readonly("recording_segments", &PyTree::recording_segments,
                             "the recording's files on disk, oldest first")
      .def_property_readonly("recording", &PyTree::recording_now)
      .def("close_recording", &PyTree::close_recording)
      .def("flush_recording", &PyTree::flush_recording)
      .def_property_readonly("page_size", &PyTree::page_size)
      .def_property_readonly("eviction_policy", &PyTree::policy)
      .def_property_readonly("poisoned", &PyTree::poisoned)
      .def_property_readonly("poison_message", &PyTree::poison_message)
      .def_property_readonly("root_id", &PyTree::root_id)
      .def("match_prefix", &PyTree::match_prefix, py::arg("tokens"), py::arg("namespace") = 0,
           "-> (int64 device indices, last device node id); splits a node where the match ends")
      .def("insert", &PyTree::insert, py::arg("tokens"), py::arg("value"), py::arg("namespace") = 0,
           "-> (prefix_len, last node id); the caller frees value[protected:prefix_len]")
      .def("lock", &PyTree::lock, py::arg("node"))
      .def("unlock", &PyTree::unlock, py::arg("lock"),
           "-> change of evictable_size() the unlock made (>= 0)")
      .def("lock_ref", &PyTree::lock_ref, py::arg("node"),
           "SGLang's inc_lock_ref: locks the node, keeps the lock; -> evictable_size() change")
      .def("unlock_ref", &PyTree::unlock_ref, py::arg("node"),
           "SGLang's dec_lock_ref: releases the node's last lock_ref lock; -> its change")
      .def("evict", &PyTree::evict, py::arg("num_tokens"), py::arg("with_paths") = false)
      .def("evictable_size", &PyTree::evictable_size)
      .def("protected_size", &PyTree::protected_size)
      .def("total_size", &PyTree::total_size)
      .def("node_count", &PyTree::node_count)
      .def("node_ids", &PyTree::node_ids)
      .def("node_info", &PyTree::node_info, py::arg("node"))
      .def("node_key", &PyTree::node_key, py::arg("node"))
      .def("node_value", &PyTree::node_value, py::arg("node"))
      .def("path_tokens", &PyTree::path_tokens, py::arg("node"))
      .def("__contains__", &PyTree::contains)
      .def("sanity_check", &PyTree::sanity_check)
      .def("stats", &PyTree::stats);
}

}  // namespace kvsim::python
