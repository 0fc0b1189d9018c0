#include "core/tiers/storage_backend.h"

namespace kvsim {

std::string_view to_string(StorageStatus status) {
  switch (status) {
    case StorageStatus::kOk:
      return "ok";
    case StorageStatus::kMiss:
      return "miss";
    case StorageStatus::kCorrupt:
      return "corrupt";
    case StorageStatus::kIoError:
      return "io_error";
  }
  return "?";
}

}  // namespace kvsim
