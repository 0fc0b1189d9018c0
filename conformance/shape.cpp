#include "conformance/shape.h"

#include <sstream>

namespace kvsim::conformance {

std::vector<Token> tokens_of(const Shape& shape, int32_t page_size) {
  std::vector<Token> out;
  const auto page = static_cast<Token>(page_size);
  for (size_t i = 0; i < shape.branches.size(); ++i) {
    const Token base = 1 + (static_cast<Token>(i) * kBranches + shape.branches[i]) * page;
    for (Token j = 0; j < page; ++j)
      out.push_back(base + j);
  }
  for (Token j = 0; j < shape.tail; ++j)  // never a page of any shape
    out.push_back(100000 + static_cast<Token>(shape.branches.size()) * 16 + j);
  return out;
}

std::string show(const Shape& shape) {
  std::ostringstream os;
  os << "toks(" << shape.ns << ", {";
  for (size_t i = 0; i < shape.branches.size(); ++i)
    os << (i ? "," : "") << static_cast<int>(shape.branches[i]);
  os << "}, " << static_cast<int>(shape.tail) << ")";
  return os.str();
}

void showValue(const Shape& shape, std::ostream& os) {
  os << show(shape);
}

rc::Gen<Shape> gen_shape(int max_pages, int32_t page_size, int namespaces) {
  // Full size whatever the caller's size: RapidCheck scales inRange by size, and properties
  // shrink their operation lists through gen::scale, which must not shrink shapes too.
  return rc::gen::resize(
      rc::kNominalSize, rc::gen::exec([=] {
        Shape s;
        s.ns = static_cast<Namespace>(
            namespaces > 1 ? *rc::gen::weightedElement<int>({{6, 1}, {1, 2}}) : 1);
        const int pages = *rc::gen::inRange(1, max_pages + 1);
        for (int i = 0; i < pages; ++i) {
          s.branches.push_back(*rc::gen::weightedElement<uint8_t>({{5, 0}, {3, 1}, {1, 2}}));
        }
        s.tail = page_size > 1 ? *rc::gen::inRange<uint8_t>(0, static_cast<uint8_t>(page_size)) : 0;
        return s;
      }));
}

}  // namespace kvsim::conformance
