// Page mosaics (workload kind page_mosaic; issue 28 kind 4): prompts assembled from a small
// alphabet of whole pages (`workload.page_alphabet` pages of the cache's page size), recombined
// so that the radix tree's walks take the branches unique random text never takes:
//
//   - a page's content recurs at different depths (the same page at position 2 of one prompt
//     and 5 of another), and inside one prompt (a block of pages repeated);
//   - a prompt is another's suffix, or another's prefix extended by a few pages;
//   - a prompt forks an earlier one at a page boundary inside what the tree holds as one node,
//     and its diverging page is one that begins a child of that node (the page another cached
//     sequence continues with where it leaves this one): the insert or match that walks it
//     diverges inside a node whose own child starts with the very page it diverges with;
//   - a family on one tick: F = the first k pages of S + x, then S, then S + x. F is admitted
//     first, its match made before S is cached; S and S + x decode `output_min` tokens, F
//     `output_max`, so both are cached before F: F's insert then meets S's node (inserted
//     whole, given child x by S + x) and diverges inside it with x. An insert meets this shape
//     only when its match is older than the tree (a prompt's own match splits the node where
//     it diverges, and the simulator inserts a prompt only when its request ends).
//
// Each prompt is whole pages, sometimes followed by a partial page of fresh tokens. Its recipe
// is one `rng` segment per page (the alphabet page's generator state), or one literal `tokens`
// segment when pages are short, so recorded traces re-expand it bit for bit.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/config/scenario.h"
#include "sim/workload/prompt.h"

namespace kvsim::sim {

class Rng;
struct Arrival;

class PageMosaic {
 public:
  // Draws the alphabet from `rng` (the workload stream): `w.page_alphabet` pages of `page`
  // tokens below `w.vocab`.
  PageMosaic(const WorkloadOptions& w, int64_t page, Rng& rng);

  // The next prompt: its tokens appended to `prompt`, its recipe and its namespace index set
  // on `a`. Within the largest prompt the scenario sizes the device pool for
  // (`system_prompt_tokens` + 4 × `prompt_max`).
  void fill(Rng& rng, Arrival& a, std::vector<Token>& prompt);
  // True while a family of prompts is being sent: the next arrives on the same tick.
  bool family_pending() const { return !pending_.empty(); }

  // The alphabet page indices of the prompts so far (the last kSources; tests).
  struct Source {
    Namespace ns = 0;
    std::vector<uint32_t> pages;
  };
  static constexpr size_t kSources = 64;
  const std::deque<Source>& sources() const { return sources_; }

 private:
  // Pages of a prompt drawn from the alphabet, the moves that recombine earlier prompts.
  std::vector<uint32_t> random_pages(Rng& rng, int64_t n) const;
  std::vector<uint32_t> fork_inside(Rng& rng, const Source& src, int64_t most) const;

  const WorkloadOptions& w_;
  int64_t page_;
  std::vector<std::vector<Token>> tokens_;  // by alphabet index
  std::vector<PromptSegment> segments_;     // by alphabet index: the page's rng segment
  std::deque<Source> sources_;
  std::deque<Source> pending_;  // the rest of a family, sent next
};

}  // namespace kvsim::sim
