// A caller's integer arrays, read in place where the dtype allows: IntBuffer (token ids or
// slots from numpy, array.array, memoryview, a torch CPU tensor, or a list of ints) and Tokens
// (a key: int32 ids as kvsim's Token, int64 "wide" ids as they are).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/types.h"

namespace kvsim::python {

// A read view of a 1-D integer buffer (numpy array, array.array, memoryview, bytes of ints) or
// a torch CPU tensor (through .numpy(), a view) or a list/tuple of ints (converted). Bad input
// raises TypeError / ValueError naming `what`.
class IntBuffer {
 public:
  IntBuffer(pybind11::handle obj, const char* what);

  size_t size() const { return size_; }
  const int32_t* data32() const { return data32_; }
  const int64_t* data64() const { return data64_; }
  int64_t at(size_t i) const { return data32_ != nullptr ? data32_[i] : data64_[i]; }

 private:
  static int64_t read_one(const char* p, char code, pybind11::ssize_t size, const char* what,
                          size_t i);
  bool read_cpu_tensor(pybind11::handle obj);

  pybind11::object keep_;
  pybind11::buffer_info info_;
  std::vector<int64_t> owned_;
  const int32_t* data32_ = nullptr;
  const int64_t* data64_ = nullptr;
  size_t size_ = 0;
};

// A caller's token ids, read in place: int32 ids as kvsim's Token, int64 ("wide") ids as they
// are (the core compares them without a narrowed copy; only the tokens of new nodes are
// narrowed, by the core, which refuses an id out of range with TokenOutOfRange: ValueError).
class Tokens {
 public:
  Tokens(pybind11::handle obj, const char* what) : buf_(obj, what) {}
  size_t size() const { return buf_.size(); }
  bool wide() const { return buf_.data32() == nullptr; }
  std::span<const Token> narrow_span() const { return {buf_.data32(), buf_.size()}; }
  std::span<const int64_t> wide_span() const { return {buf_.data64(), buf_.size()}; }
  // f(span of Token or of int64_t), whichever the caller passed.
  template <typename F>
  decltype(auto) visit(F&& f) const {
    return wide() ? f(wide_span()) : f(narrow_span());
  }

 private:
  IntBuffer buf_;
};

}  // namespace kvsim::python
