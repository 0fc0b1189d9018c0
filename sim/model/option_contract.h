// The HiCache option contract at the API edge, checked by the simulator on every run (issue 12:
// errors, not aborts; issue 11: a hunt reaches the option-handling code too). A drawn scenario
// always holds page-multiple, valid pool sizes, so without this check the core's rounding and
// its rejection of caller mistakes are code no run ever executes.
//
// The contract (docs/sglang-parity.md, "Caller mistakes"): pool sizes are rounded down to whole
// pages, as SGLang's allocator does; a page_size below 1, or a pool (device, host, and the SWA
// pools when given) smaller than one page, is a std::invalid_argument from the constructor —
// never an abort, never accepted. The policies' names (eviction, write, prefetch stop) parse to
// the policy they name, and nothing else parses. alloc_device / alloc_swa of 0 tokens is an empty
// vector, of a negative or non-page-multiple count nullopt with nothing allocated; freeing an empty
// vector does nothing. Prefetch: without a storage tier prefetch_from_storage starts nothing; a
// second prefetch of a request already prefetching is refused; releasing a request without a
// prefetch does nothing, and one with a prefetch revokes it and leaves the cache sane.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cache/hi_cache_options.h"

namespace kvsim::sim {

// Builds small caches shaped like `options` (same page size, components, layouts and policies)
// with pool sizes off the page grid and with each rule broken in turn. nullopt when every case
// behaves as the contract says; otherwise what the core did instead.
std::optional<std::string> check_option_contract(const HiCacheOptions& options);

// A policy's names as a caller passes them (scenario files, call traces, the Python module):
// each policy's own name parses to it, and a near miss (empty, another case, cut short, a
// trailing space, to_string's "?") is refused and leaves the output as it was. nullopt when
// they do; otherwise the first name that did not. Part of check_option_contract; `parse` is a
// parameter so a test can plant a wrong one.
template <typename Policy>
std::optional<std::string> policy_names_problem(const char* field,
                                                std::initializer_list<Policy> all,
                                                bool (*parse)(std::string_view, Policy*)) {
  const std::vector<Policy> policies(all);
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string name(to_string(policies[i]));
    Policy out = policies[(i + 1) % policies.size()];
    if (!parse(name, &out)) return std::string(field) + " name \"" + name + "\" was refused";
    if (out != policies[i]) {
      return std::string(field) + " name \"" + name + "\" parses as \"" +
             std::string(to_string(out)) + "\"";
    }
    std::string upper = name;
    for (char& c : upper)
      c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    for (const std::string& bad :
         {std::string(), upper, name.substr(0, name.size() - 1), name + " ", std::string("?")}) {
      Policy kept = policies[(i + 1) % policies.size()];
      const Policy before = kept;
      if (parse(bad, &kept) || kept != before) {
        return std::string(field) + " name \"" + bad + "\" was accepted (as \"" +
               std::string(to_string(kept)) + "\") instead of refused";
      }
    }
  }
  return std::nullopt;
}

}  // namespace kvsim::sim
