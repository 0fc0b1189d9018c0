#include "sim/campaign/covering_array.h"

#include <numeric>
#include <stdexcept>

#include "sim/base/rng.h"

namespace kvsim::sim {
namespace {

constexpr size_t kUnset = static_cast<size_t>(-1);

// A group of factors to cover whole (a pair or a chosen triple) and which level combinations of
// it rows already hold.
struct Group {
  std::vector<size_t> factors;
  std::vector<bool> covered;  // by combination index (mixed radix over the factors' levels)
};

size_t combination_index(const Group& g, const CoveringSpec& spec, const std::vector<size_t>& row) {
  size_t index = 0;
  for (size_t f : g.factors)
    index = index * spec.factors[f].levels.size() + row[f];
  return index;
}

// The levels of combination `index` of group `g`, written into `row`.
void write_combination(const Group& g, const CoveringSpec& spec, size_t index,
                       std::vector<size_t>& row) {
  for (size_t i = g.factors.size(); i-- > 0;) {
    const size_t n = spec.factors[g.factors[i]].levels.size();
    row[g.factors[i]] = index % n;
    index /= n;
  }
}

bool conflicts(const CoveringSpec& spec, const std::vector<size_t>& row) {
  for (const auto& [a, b] : spec.forbidden) {
    if (row[a.factor] == a.level && row[b.factor] == b.level) return true;
  }
  return false;
}

// True when every factor of `g` is set in `row`.
bool filled(const Group& g, const std::vector<size_t>& row) {
  for (size_t f : g.factors)
    if (row[f] == kUnset) return false;
  return true;
}

std::vector<Group> groups_of(const CoveringSpec& spec) {
  std::vector<Group> groups;
  auto add = [&](std::vector<size_t> factors) {
    size_t n = 1;
    for (size_t f : factors)
      n *= spec.factors[f].levels.size();
    groups.push_back(Group{std::move(factors), std::vector<bool>(n, false)});
  };
  const size_t k = spec.factors.size();
  for (size_t i = 0; i < k; ++i)
    for (size_t j = i + 1; j < k; ++j)
      add({i, j});
  for (const auto& t : spec.triples)
    add({t[0], t[1], t[2]});
  return groups;
}

// Whether combination `index` of `g` can occur in a row at all.
bool combination_allowed(const Group& g, const CoveringSpec& spec, size_t index) {
  std::vector<size_t> row(spec.factors.size(), kUnset);
  write_combination(g, spec, index, row);
  for (const auto& [a, b] : spec.forbidden) {
    if (row[a.factor] == a.level && row[b.factor] == b.level) return false;
  }
  return true;
}

void validate(const CoveringSpec& spec) {
  if (spec.factors.empty()) throw std::invalid_argument("covering array: no factors");
  for (const auto& f : spec.factors) {
    if (f.levels.empty()) {
      throw std::invalid_argument("covering array: factor " + f.name + " has no levels");
    }
  }
  const size_t k = spec.factors.size();
  for (const auto& t : spec.triples) {
    if (t[0] >= k || t[1] >= k || t[2] >= k || t[0] == t[1] || t[0] == t[2] || t[1] == t[2]) {
      throw std::invalid_argument("covering array: a triple names a missing or repeated factor");
    }
  }
  for (const auto& [a, b] : spec.forbidden) {
    if (a.factor >= k || b.factor >= k || a.factor == b.factor ||
        a.level >= spec.factors[a.factor].levels.size() ||
        b.level >= spec.factors[b.factor].levels.size()) {
      throw std::invalid_argument("covering array: a forbidden pair names a missing setting");
    }
  }
}

}  // namespace

CoveringArray::CoveringArray(CoveringSpec spec) : spec_(std::move(spec)) {
  validate(spec_);
  std::vector<Group> groups = groups_of(spec_);
  // Combinations a constraint rules out count as covered from the start.
  for (Group& g : groups) {
    for (size_t i = 0; i < g.covered.size(); ++i)
      if (!combination_allowed(g, spec_, i)) g.covered[i] = true;
  }
  const size_t k = spec_.factors.size();
  Rng rng = rng_stream(0x5eed, "covering-array");
  // How many rows so far use each level: a tie goes to the least used level, so the factors
  // that no triple drives still spread over their levels (not the lowest level in most rows).
  std::vector<std::vector<size_t>> used(k);
  for (size_t f = 0; f < k; ++f)
    used[f].assign(spec_.factors[f].levels.size(), 0);
  while (true) {
    // The first uncovered combination seeds the row.
    std::vector<size_t> row(k, kUnset);
    bool any = false;
    for (const Group& g : groups) {
      for (size_t i = 0; i < g.covered.size() && !any; ++i) {
        if (!g.covered[i]) {
          write_combination(g, spec_, i, row);
          any = true;
        }
      }
      if (any) break;
    }
    if (!any) break;
    std::vector<size_t> order(k);
    std::iota(order.begin(), order.end(), size_t{0});
    for (size_t i = k; i > 1; --i)
      std::swap(order[i - 1], order[rng.below(i)]);
    for (size_t f : order) {
      if (row[f] != kUnset) continue;
      size_t best = kUnset, best_gain = 0;
      for (size_t level = 0; level < spec_.factors[f].levels.size(); ++level) {
        row[f] = level;
        bool bad = false;
        for (const auto& [a, b] : spec_.forbidden) {
          if (row[a.factor] == a.level && row[b.factor] == b.level) bad = true;
        }
        if (bad) continue;
        size_t gain = 0;
        for (const Group& g : groups) {
          bool has_f = false;
          for (size_t gf : g.factors)
            has_f = has_f || gf == f;
          if (has_f && filled(g, row) && !g.covered[combination_index(g, spec_, row)]) ++gain;
        }
        if (best == kUnset || gain > best_gain ||
            (gain == best_gain && used[f][level] < used[f][best])) {
          best = level;
          best_gain = gain;
        }
      }
      if (best == kUnset) throw std::logic_error("covering array: constraints leave no level");
      row[f] = best;
    }
    for (Group& g : groups)
      g.covered[combination_index(g, spec_, row)] = true;
    for (size_t f = 0; f < k; ++f)
      ++used[f][row[f]];
    rows_.push_back(std::move(row));
  }
  // An odd count: seeds stepping by 2 visit every row too.
  if (rows_.size() % 2 == 0) rows_.push_back(rows_.front());
}

CoveringArray::CoveringArray(CoveringSpec spec, std::vector<std::vector<size_t>> rows)
    : spec_(std::move(spec)), rows_(std::move(rows)) {
  validate(spec_);
  for (const auto& row : rows_) {
    if (row.size() != spec_.factors.size()) {
      throw std::invalid_argument("covering array: a row of the wrong width");
    }
    for (size_t f = 0; f < row.size(); ++f) {
      if (row[f] >= spec_.factors[f].levels.size()) {
        throw std::invalid_argument("covering array: a row names a missing level of " +
                                    spec_.factors[f].name);
      }
    }
    if (conflicts(spec_, row)) throw std::invalid_argument("covering array: a forbidden row");
  }
}

bool CoveringArray::allowed(const std::vector<size_t>& row) const {
  return !conflicts(spec_, row);
}

std::vector<std::string> CoveringArray::uncovered() const {
  std::vector<std::string> missing;
  for (const Group& g : groups_of(spec_)) {
    std::vector<bool> seen(g.covered.size(), false);
    for (const auto& row : rows_)
      seen[combination_index(g, spec_, row)] = true;
    for (size_t i = 0; i < seen.size(); ++i) {
      if (seen[i] || !combination_allowed(g, spec_, i)) continue;
      std::vector<size_t> row(spec_.factors.size(), kUnset);
      write_combination(g, spec_, i, row);
      std::string s;
      for (size_t f : g.factors) {
        s += (s.empty() ? "" : " x ") + spec_.factors[f].name + "=" +
             spec_.factors[f].levels[row[f]];
      }
      missing.push_back(s);
    }
  }
  return missing;
}

const CoveringArray& swarm_covering_array() {
  static const CoveringArray array([] {
    CoveringSpec s;
    s.factors.resize(kSwarmFactors);
    s.factors[kFactorStorage] = {"storage", {"none", "memory", "memory_budget", "file_budget"}};
    s.factors[kFactorNamespaces] = {"namespaces", {"one", "several", "several_cross"}};
    s.factors[kFactorComponents] = {"components", {"full", "swa", "mamba", "swa_mamba", "pd"}};
    s.factors[kFactorFaults] = {"faults", {"off", "sparse", "dense"}};
    s.factors[kFactorTreeShape] = {"tree_shape", {"fan_out", "deep", "fork", "mixed", "mosaic"}};
    s.factors[kFactorPage] = {"page", {"one", "odd", "small_pow2", "large"}};
    s.factors[kFactorWritePolicy] = {"write_policy", {"write_through", "selective", "write_back"}};
    s.factors[kFactorPressure] = {"pressure", {"starved", "roomy", "host_small"}};
    s.factors[kFactorEviction] = {"eviction", {"lru", "lfu"}};
    s.factors[kFactorPrefetchThreshold] = {"prefetch_threshold",
                                           {"zero", "within_page", "beyond_page"}};
    s.triples = {{kFactorStorage, kFactorNamespaces, kFactorComponents},
                 {kFactorStorage, kFactorComponents, kFactorFaults},
                 {kFactorStorage, kFactorNamespaces, kFactorTreeShape},
                 {kFactorStorage, kFactorFaults, kFactorTreeShape},
                 {kFactorComponents, kFactorFaults, kFactorTreeShape},
                 {kFactorStorage, kFactorPressure, kFactorPrefetchThreshold}};
    // A PD decode instance has no storage tier (validate() of scenario.cpp).
    for (size_t level = 1; level < 4; ++level)
      s.forbidden.push_back({{kFactorComponents, 4}, {kFactorStorage, level}});
    return s;
  }());
  return array;
}

const std::vector<size_t>& swarm_row(uint64_t seed) {
  const CoveringArray& a = swarm_covering_array();
  return a.row(static_cast<size_t>(seed % a.rows()));
}

}  // namespace kvsim::sim
