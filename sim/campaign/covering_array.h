// A covering array for the swarm (issue 28 kind 4): rows of feature settings such that every
// pair of settings of two features (strength 2), and every triple of settings of the chosen
// feature triples, occurs in some row, except the combinations a constraint forbids. The swarm
// draws a unit's features from row (seed mod rows) instead of one coin per feature, so a
// combination that independent coins reach in a few units a minute, or never, is reached
// within a bounded number of units (docs/hunt.md, "Combinatorial swarm").
//
// Construction: greedy (AETG-style), deterministic: each new row starts from the first
// uncovered combination, then gives each other feature, in an order drawn from a fixed seed,
// the level that covers the most uncovered combinations (ties to the level fewest rows use,
// so every factor spreads over its levels). Every row covers at least one new combination, so
// it terminates; the row count is padded to an odd number, so seeds stepping by 1 or by 2 (a
// hunt alternating swarm and named units) both visit every row within `rows()` swarm units.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsim::sim {

struct CoveringFactor {
  std::string name;
  std::vector<std::string> levels;
};

// One setting: factor index and level index.
struct CoveringSetting {
  size_t factor = 0;
  size_t level = 0;
};

struct CoveringSpec {
  std::vector<CoveringFactor> factors;
  std::vector<std::array<size_t, 3>> triples;  // factor indices, each triple covered whole
  // Settings that never occur together in a row (the drawn scenario could not hold both).
  std::vector<std::pair<CoveringSetting, CoveringSetting>> forbidden;
};

class CoveringArray {
 public:
  // Throws std::invalid_argument on a spec with no factors, a factor without levels, or a
  // triple or forbidden pair naming a factor or level that does not exist.
  explicit CoveringArray(CoveringSpec spec);
  // An array of given rows (to check a hand-made one with uncovered()); throws
  // std::invalid_argument on a row of the wrong width, a level out of range or a forbidden pair.
  CoveringArray(CoveringSpec spec, std::vector<std::vector<size_t>> rows);
  size_t rows() const { return rows_.size(); }
  // The level of each factor in row `r` (r < rows()).
  const std::vector<size_t>& row(size_t r) const { return rows_.at(r); }
  const CoveringSpec& spec() const { return spec_; }
  // True when `row` holds no forbidden pair.
  bool allowed(const std::vector<size_t>& row) const;
  // The combinations (pairs, then chosen triples) no row holds although they are allowed; empty
  // for a correct array. A test's check, recomputed from the rows.
  std::vector<std::string> uncovered() const;

 private:
  CoveringSpec spec_;
  std::vector<std::vector<size_t>> rows_;
};

// The swarm's factors and their levels, in the order swarm.cpp reads them.
enum SwarmFactor : size_t {
  kFactorStorage = 0,        // none, memory, memory_budget, file_budget
  kFactorNamespaces,         // one, several, several_cross
  kFactorComponents,         // full, swa, mamba, swa_mamba, pd
  kFactorFaults,             // off, sparse, dense
  kFactorTreeShape,          // fan_out, deep, fork, mixed, mosaic
  kFactorPage,               // one, odd, small_pow2, large
  kFactorWritePolicy,        // write_through, selective, write_back
  kFactorPressure,           // starved, roomy, host_small
  kFactorEviction,           // lru, lfu
  kFactorPrefetchThreshold,  // zero, within_page, beyond_page
  kSwarmFactors
};

// The swarm's covering array: strength 2 over the factors above, plus the triples
// storage x namespaces x components, storage x components x faults, storage x namespaces x
// tree shape, storage x faults x tree shape, components x faults x tree shape and storage x
// pressure x prefetch threshold (a threshold at its edge, 0, meeting a host pool too small for
// a prefetch's hits); PD holds no storage tier (forbidden). Built once.
const CoveringArray& swarm_covering_array();

// The swarm row of seed `seed`: row (seed mod rows()).
const std::vector<size_t>& swarm_row(uint64_t seed);

}  // namespace kvsim::sim
