// The HiCache option contract at the API edge, checked by the simulator on every run (issue 12:
// errors, not aborts; issue 11: a hunt reaches the option-handling code too). A drawn scenario
// always holds page-multiple, valid pool sizes, so without this check the core's rounding and
// its rejection of caller mistakes are code no run ever executes.
//
// The contract (docs/sglang-parity.md, "Caller mistakes"): pool sizes are rounded down to whole
// pages, as SGLang's allocator does; a page_size below 1, or a pool (device, host, and the SWA
// pools when given) smaller than one page, is a std::invalid_argument from the constructor —
// never an abort, never accepted. alloc_device / alloc_swa of 0 tokens is an empty vector, of
// a negative or non-page-multiple count nullopt with nothing allocated; freeing an empty
// vector does nothing.
#pragma once

#include <optional>
#include <string>

#include "core/cache/hi_cache_options.h"

namespace kvsim::sim {

// Builds small caches shaped like `options` (same page size, components, layouts and policies)
// with pool sizes off the page grid and with each rule broken in turn. nullopt when every case
// behaves as the contract says; otherwise what the core did instead.
std::optional<std::string> check_option_contract(const HiCacheOptions& options);

}  // namespace kvsim::sim
