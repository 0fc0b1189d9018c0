// IntBuffer (int_buffer.h): how each kind of caller array is read, in place where it can be.
#include "python/src/int_buffer.h"

#include <cstdint>
#include <limits>
#include <string>

namespace py = pybind11;

namespace kvsim::python {
namespace {

// torch's Tensor type and the dtypes read in place, learnt from the first object whose type
// comes from an already imported torch (kvsim never imports torch itself). References held for
// the life of the process.
struct TorchTypes {
  PyObject* tensor = nullptr;
  PyObject* int64 = nullptr;
  PyObject* int32 = nullptr;
  PyObject* strided = nullptr;
};

const TorchTypes* torch_types(py::handle obj) {
  static TorchTypes types;
  if (types.tensor != nullptr) return &types;
  // Only an object of a class defined by torch can make us look (no import on other inputs).
  py::object mod = py::getattr(py::type::handle_of(obj), "__module__", py::none());
  if (!py::isinstance<py::str>(mod) || mod.cast<std::string>().rfind("torch", 0) != 0)
    return nullptr;
  PyObject* torch = PyImport_GetModule(py::str("torch").ptr());  // new reference, or null
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  py::object t = py::reinterpret_steal<py::object>(torch);
  types.int64 = py::object(t.attr("int64")).release().ptr();
  types.int32 = py::object(t.attr("int32")).release().ptr();
  types.strided = py::object(t.attr("strided")).release().ptr();
  types.tensor = py::object(t.attr("Tensor")).release().ptr();
  return &types;
}

}  // namespace

IntBuffer::IntBuffer(py::handle obj, const char* what) {
  // torch tensors have no buffer protocol: only other objects are looked at as tensors, so a
  // numpy array or an array.array never pays for the check.
  if (!PyObject_CheckBuffer(obj.ptr()) && read_cpu_tensor(obj)) return;
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    owned_.reserve(seq.size());
    for (py::handle item : seq) {
      if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item)) {
        throw py::type_error(std::string(what) + ": expected integers, got " +
                             std::string(py::str(item.get_type().attr("__name__"))));
      }
      owned_.push_back(item.cast<int64_t>());
    }
    data64_ = owned_.data();
    size_ = owned_.size();
    return;
  }
  py::object src = py::reinterpret_borrow<py::object>(obj);
  if (!PyObject_CheckBuffer(src.ptr())) {
    if (py::hasattr(src, "dtype") && py::hasattr(src, "numpy")) {
      // A torch tensor: a CPU one gives a numpy view (no copy); another device's is copied
      // to the host first (.cpu()), as a caller would have to.
      try {
        src = src.attr("numpy")();
      } catch (py::error_already_set&) {
        if (!py::hasattr(src, "cpu")) throw;
        src = src.attr("cpu")().attr("numpy")();
      }
    } else {
      throw py::type_error(std::string(what) +
                           ": expected a 1-D integer buffer (numpy, array.array, torch CPU "
                           "tensor) or a list of ints, got " +
                           std::string(py::str(obj.get_type().attr("__name__"))));
    }
  }
  keep_ = src;
  info_ = py::buffer(src).request();
  if (info_.ndim != 1) {
    throw py::value_error(std::string(what) + ": expected a 1-D buffer, got " +
                          std::to_string(info_.ndim) + " dimensions");
  }
  size_ = static_cast<size_t>(info_.shape[0]);
  if (size_ > 1 && info_.strides[0] != info_.itemsize) {
    throw py::value_error(std::string(what) + ": expected a contiguous buffer");
  }
  const std::string& f = info_.format;
  const char code = f.empty() ? '?' : f.back();  // skip byte-order prefixes like '<' / '='
  const bool is_signed = code == 'b' || code == 'h' || code == 'i' || code == 'l' || code == 'q';
  const bool is_unsigned = code == 'B' || code == 'H' || code == 'I' || code == 'L' || code == 'Q';
  if (!(is_signed || is_unsigned)) {
    throw py::type_error(std::string(what) + ": expected an integer dtype, got format '" + f + "'");
  }
  if (is_signed && info_.itemsize == 4) {
    data32_ = static_cast<const int32_t*>(info_.ptr);
  } else if (is_signed && info_.itemsize == 8) {
    data64_ = static_cast<const int64_t*>(info_.ptr);
  } else {
    // Narrow or unsigned: widen once (rare: SGLang passes int64).
    owned_.resize(size_);
    for (size_t i = 0; i < size_; ++i) {
      const char* p = static_cast<const char*>(info_.ptr) + i * static_cast<size_t>(info_.itemsize);
      owned_[i] = read_one(p, code, info_.itemsize, what, i);
    }
    data64_ = owned_.data();
  }
}

int64_t IntBuffer::read_one(const char* p, char code, py::ssize_t size, const char* what,
                            size_t i) {
  switch (size) {
    case 1:
      return code == 'B' ? static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(p))
                         : static_cast<int64_t>(*reinterpret_cast<const int8_t*>(p));
    case 2:
      return code == 'H' ? static_cast<int64_t>(*reinterpret_cast<const uint16_t*>(p))
                         : static_cast<int64_t>(*reinterpret_cast<const int16_t*>(p));
    case 4:
      return static_cast<int64_t>(*reinterpret_cast<const uint32_t*>(p));
    case 8: {
      const uint64_t u = *reinterpret_cast<const uint64_t*>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw py::value_error(std::string(what) + "[" + std::to_string(i) +
                              "] = " + std::to_string(u) + " does not fit in int64");
      }
      return static_cast<int64_t>(u);
    }
    default:
      throw py::type_error(std::string(what) + ": unsupported item size " + std::to_string(size));
  }
}

// A strided, 1-D, contiguous int64 or int32 torch tensor on the CPU, read in place from its
// data pointer: a few attribute reads instead of building a numpy view per call. Anything else
// (another device or dtype, a view with steps) goes the general way and gets its message.
bool IntBuffer::read_cpu_tensor(py::handle obj) {
  const TorchTypes* tt = torch_types(obj);
  if (tt == nullptr || !PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(tt->tensor)))
    return false;
  // Interned names: an attribute read by a C string would build a new str every time.
  static PyObject* const kIsCpu = PyUnicode_InternFromString("is_cpu");
  static PyObject* const kLayout = PyUnicode_InternFromString("layout");
  static PyObject* const kDtype = PyUnicode_InternFromString("dtype");
  static PyObject* const kDim = PyUnicode_InternFromString("dim");
  static PyObject* const kNumel = PyUnicode_InternFromString("numel");
  static PyObject* const kIsContiguous = PyUnicode_InternFromString("is_contiguous");
  static PyObject* const kDataPtr = PyUnicode_InternFromString("data_ptr");
  const auto get = [&](PyObject* name) {
    PyObject* v = PyObject_GetAttr(obj.ptr(), name);
    if (v == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(v);
  };
  const auto call = [&](PyObject* name) {
    PyObject* v = PyObject_CallMethodObjArgs(obj.ptr(), name, nullptr);
    if (v == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(v);
  };
  if (get(kIsCpu).ptr() != Py_True) return false;
  if (get(kLayout).ptr() != tt->strided) return false;
  const py::object dtype = get(kDtype);
  const bool wide = dtype.ptr() == tt->int64;
  if (!wide && dtype.ptr() != tt->int32) return false;
  if (call(kDim).cast<int64_t>() != 1) return false;
  const auto n = call(kNumel).cast<size_t>();
  if (n > 1 && call(kIsContiguous).ptr() != Py_True) return false;
  const auto ptr = call(kDataPtr).cast<uintptr_t>();
  keep_ = py::reinterpret_borrow<py::object>(obj);  // the tensor outlives the call
  size_ = n;
  if (wide) {
    data64_ = reinterpret_cast<const int64_t*>(ptr);
  } else {
    data32_ = reinterpret_cast<const int32_t*>(ptr);
  }
  return true;
}

}  // namespace kvsim::python
