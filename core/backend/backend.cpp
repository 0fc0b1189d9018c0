#include "core/backend/backend.h"

namespace kvsim {

std::string_view to_string(KVLayout layout) {
  return layout == KVLayout::kLayerFirst ? "layer_first" : "page_first";
}

}  // namespace kvsim
