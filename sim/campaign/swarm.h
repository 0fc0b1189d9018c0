// Swarm configurations (Groce et al., "Swarm Testing", ISSTA 2012; FoundationDB's randomized
// test configurations): a whole Scenario drawn from one seed over the space the core supports —
// page size (1 to 64), device/host/side pool sizes from starved to roomy (the host pool smaller
// than the device pool sometimes), write policy, host layout, components (full attention, SWA,
// Mamba, both, a PD decode instance with or without a sparse index buffer), storage and its
// policies, the load-back threshold, 1-4 namespaces, the workload mix (adversarial generators
// included) and the fault sites. The main features (storage, namespaces, components, faults,
// tree shape, page size, write and eviction policy, pool pressure) come from a covering array
// (covering_array.h): every pair of their settings, and chosen triples, meet within
// swarm_covering_array().rows() consecutive swarm seeds; the rest is drawn on the seed's coins.
//
// The drawn scenario is an ordinary Scenario: it goes into the trace header, so replay and
// shrink work unchanged. Every draw is valid (parse_scenario accepts its JSON): the draw picks
// the workload first, then sizes the pools around it, then repair() clamps what is left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/scenario.h"

namespace kvsim::sim {

// The scenario of swarm seed `seed` (a pure function of the seed). Its name is "swarm".
Scenario draw_scenario(uint64_t seed);

// Clamps a drawn scenario into the valid space (validate() of scenario.cpp, kRun): pool sizes
// page multiples large enough for the largest request, one Mamba state per running request
// plus one, PD without SWA, Mamba or storage, the sparse index buffer with PD only.
void repair(Scenario& s);

// The features a scenario exercises, as short tags ("page1", "swa", "mamba", "storage",
// "host<device", "fork", ...): the hunt counts configurations by feature.
std::vector<std::string> features(const Scenario& s);

}  // namespace kvsim::sim
