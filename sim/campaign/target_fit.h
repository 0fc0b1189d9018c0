// Fitting a drawn configuration to the cache under test. The swarm draws every feature kvsim's
// core has; another target (SGLang's own cache through its driver) supports a subset, which its
// driver reports for the revision it loads (sim/model/sglang_cache.h, sglang_capabilities). A
// hunt of such a target turns the features it lacks off in each drawn unit, so every unit runs
// instead of being refused by the driver.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/scenario.h"
#include "sim/model/target.h"

namespace kvsim::sim {

struct TargetCapabilities {
  bool storage = true;
  bool hybrid = false;  // SWA and Mamba components, together and beside every tier (kvsim's core)
  // The SWA component alone beside HiCache, without storage, PD or the sparse index (SGLang's
  // FULL + SWA UnifiedRadixCache); likewise the Mamba component.
  bool swa = false;
  bool mamba = false;
  // The host layouts the Mamba component runs with (SGLang's MambaPoolHost asserts page-first
  // layouts at the August 2026 snapshot): a Mamba unit drawn with another gets the first of these.
  std::vector<KVLayout> mamba_host_layouts = {KVLayout::kLayerFirst, KVLayout::kPageFirst};
  bool sparse_index = false;
  bool pd = false;
  // A file store with a byte budget, or one reused from an earlier run (SGLang's HiCacheFile has
  // neither): such a drawn store becomes the in-memory one, budget kept.
  bool file_store_budget = false;
  // A host pool no larger than the device pool (SGLang's host pools assert it is larger): such a
  // drawn host pool becomes twice the device pool, SGLang's default ratio.
  bool small_host = false;
};

TargetCapabilities capabilities_of(const Target& target);

// The driver's `mamba_host_layouts` (["layer_first", "page_first"] or a part); throws
// std::invalid_argument on anything else.
std::vector<KVLayout> host_layouts_from_json(const nlohmann::json& names);

// Turns off what `target` cannot run; returns what it turned off ("swa", "mamba", ...), empty
// when the scenario runs as drawn. A target other than kvsim's core also gets units of about
// kSglangUnitOps ops ("unit_length" when it lowered the requests; fit_unit_length).
std::vector<std::string> fit_to_target(Scenario& s, const Target& target);

// The same, for a target with capabilities `can` (`kvsim`: kvsim's core).
std::vector<std::string> fit_to_capabilities(Scenario& s, const TargetCapabilities& can,
                                             bool kvsim);

// Unit length for a slow target. A unit of SGLang's target runs every op through a Python driver
// (~1 ms an op), where kvsim's core runs the same op in ~1 us: a drawn unit (20-120 requests,
// mean ~7,000 ops) takes ~20 s there. To meet issue 27's 50 swarm units a minute on one core, the
// hunt gives such a target units of ~kSglangUnitOps ops (derivation in target_fit.cpp).
constexpr int64_t kSglangUnitOps = 800;
// Fewer requests than this share too little to make a cache state worth a unit (and with the
// swarm's abort faults more units would finish no request: 8 of 400 at 6 requests).
constexpr int64_t kMinUnitRequests = 6;

// The ops one request of `s` is expected to cost the simulator: a fit of the ops per request of
// 400 swarm units (see target_fit.cpp); within x0.4-x2 of the run's own for 90 % of them.
double estimated_ops_per_request(const Scenario& s);

// Caps s.workload.requests so that the unit is expected to run about `ops` ops (never below
// kMinUnitRequests, never above what was drawn), and shrinks its pools (device, host, SWA, the
// store's budget) by the same fraction, within the floors the scenario needs, so that the shorter
// unit keeps the drawn pressure; true when it lowered them. Depends on `s` only.
bool fit_unit_length(Scenario& s, int64_t ops);

}  // namespace kvsim::sim
