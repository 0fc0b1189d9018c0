#include "core/cache/hi_cache_options.h"

namespace kvsim {

std::string_view to_string(WritePolicy policy) {
  switch (policy) {
    case WritePolicy::kWriteThrough:
      return "write_through";
    case WritePolicy::kWriteThroughSelective:
      return "write_through_selective";
    case WritePolicy::kWriteBack:
      return "write_back";
  }
  return "?";
}

std::string_view to_string(PrefetchStopPolicy policy) {
  switch (policy) {
    case PrefetchStopPolicy::kBestEffort:
      return "best_effort";
    case PrefetchStopPolicy::kWaitComplete:
      return "wait_complete";
    case PrefetchStopPolicy::kTimeout:
      return "timeout";
  }
  return "?";
}

bool parse_write_policy(std::string_view text, WritePolicy* out) {
  for (auto p :
       {WritePolicy::kWriteThrough, WritePolicy::kWriteThroughSelective, WritePolicy::kWriteBack}) {
    if (to_string(p) == text) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool parse_prefetch_stop_policy(std::string_view text, PrefetchStopPolicy* out) {
  for (auto p : {PrefetchStopPolicy::kBestEffort, PrefetchStopPolicy::kWaitComplete,
                 PrefetchStopPolicy::kTimeout}) {
    if (to_string(p) == text) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace kvsim
