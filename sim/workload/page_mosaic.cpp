#include "sim/workload/page_mosaic.h"

#include <algorithm>

#include "sim/base/rng.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {
namespace {

// Pages below this many tokens go into a recipe as literal tokens (shorter than their `rng`
// segments would be).
constexpr int64_t kLiteralPages = 8;

// `n` fresh tokens below `vocab`: the segment that expands to them, `rng` moved past them.
PromptSegment fresh_tokens(Rng& rng, int64_t n, int64_t vocab) {
  const PromptSegment seg{
      .kind = PromptSegment::Kind::kRng, .value = rng.state(), .n = n, .vocab = vocab};
  for (int64_t i = 0; i < n; ++i)
    rng.next();  // Rng::below draws one value per token
  return seg;
}

size_t common_pages(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

}  // namespace

PageMosaic::PageMosaic(const WorkloadOptions& w, int64_t page, Rng& rng) : w_(w), page_(page) {
  for (int64_t i = 0; i < w.page_alphabet; ++i) {
    segments_.push_back(fresh_tokens(rng, page, w.vocab));
    tokens_.push_back(expand_recipe({segments_.back()}).vec());
  }
}

std::vector<uint32_t> PageMosaic::random_pages(Rng& rng, int64_t n) const {
  std::vector<uint32_t> pages;
  for (int64_t i = 0; i < n; ++i)
    pages.push_back(static_cast<uint32_t>(rng.below(tokens_.size())));
  return pages;
}

// `src` cut at a page k inside its path, then the page that begins a child of the node holding
// page k, as the recent prompts built the tree: the first position b > k where another prompt
// of the namespace leaves `src` (or ends) is a node boundary, and the pages the prompts sharing
// src's first b pages hold at b begin that node's children. Empty when `src` is one page.
std::vector<uint32_t> PageMosaic::fork_inside(Rng& rng, const Source& src, int64_t most) const {
  const size_t len = src.pages.size();
  if (len < 2) return {};
  const auto k = static_cast<size_t>(rng.between(1, static_cast<int64_t>(len) - 1));
  size_t b = len;
  for (const Source& t : sources_) {
    if (t.ns != src.ns) continue;
    const size_t m = common_pages(t.pages, src.pages);
    if (m > k && m < b) b = m;
  }
  std::vector<uint32_t> next;
  for (const Source& t : sources_) {
    if (t.ns == src.ns && t.pages.size() > b && common_pages(t.pages, src.pages) >= b &&
        t.pages[b] != src.pages[k]) {
      next.push_back(t.pages[b]);
    }
  }
  if (next.empty()) {  // a page from deeper in the prompt: the same page at another depth
    for (size_t j = k + 1; j < len; ++j)
      if (src.pages[j] != src.pages[k]) next.push_back(src.pages[j]);
  }
  if (next.empty()) {
    for (uint32_t p = 0; p < tokens_.size(); ++p)
      if (p != src.pages[k]) next.push_back(p);
  }
  std::vector<uint32_t> pages(src.pages.begin(), src.pages.begin() + static_cast<ptrdiff_t>(k));
  if (!next.empty()) pages.push_back(next[rng.below(next.size())]);
  for (uint32_t p : random_pages(rng, rng.between(0, 2)))
    pages.push_back(p);
  pages.resize(std::min(pages.size(), static_cast<size_t>(most)));
  return pages;
}

void PageMosaic::fill(Rng& rng, Arrival& a, std::vector<Token>& prompt) {
  const int64_t cap = w_.system_prompt_tokens + 4 * w_.prompt_max;
  // Now and then a partial page of fresh tokens after the whole pages.
  const int64_t tail = page_ > 1 && rng.chance(0.25) ? rng.between(1, page_ - 1) : 0;
  const int64_t most = std::max<int64_t>(0, cap - tail) / page_;
  const Namespace any = rng.below(static_cast<uint64_t>(w_.namespaces));
  if (most < 1 || tokens_.empty()) {  // no whole page fits: fresh tokens only
    const int64_t n = std::min(cap, rng.between(w_.prompt_min, w_.prompt_max));
    a.ns = any;
    a.recipe = {fresh_tokens(rng, std::max<int64_t>(1, n), w_.vocab)};
    expand_recipe(a.recipe, prompt);
    return;
  }
  const int64_t longest =
      std::min<int64_t>(most, std::max<int64_t>(3, 2 * ((w_.prompt_max + page_ - 1) / page_)));
  Source made{.ns = any, .pages = {}};
  // The moves, by weight: fresh 1, extend 2, fork inside a node 2, suffix 1, repeat 1,
  // family 3 (a family's later members come first, on the same tick).
  const uint64_t move = !pending_.empty() ? 10 : sources_.empty() ? 0 : rng.below(10);
  const Source* src = move == 0 || move == 10 ? nullptr : &sources_[rng.below(sources_.size())];
  if (src != nullptr) {
    made.ns = w_.cross_namespace && rng.chance(0.5) ? any : src->ns;
  }
  if (move == 10) {
    made = std::move(pending_.front());
    pending_.pop_front();
    a.output_len = w_.output_min;
  } else if (move >= 7 && most >= 3) {  // a family: F = S's first k pages + x, S, S + x
    const int64_t len = rng.between(2, std::min(most - 1, std::max<int64_t>(longest, 6)));
    Source s{.ns = made.ns, .pages = {}};
    s.pages = rng.chance(0.5) && static_cast<int64_t>(src->pages.size()) >= len
                  ? std::vector<uint32_t>(src->pages.begin(), src->pages.begin() + len)
                  : random_pages(rng, len);
    // A deep k: the first k pages of S are less likely in the tree already (F's match would
    // split there). x differs from S's page k when the alphabet has two pages.
    const auto k = static_cast<size_t>(rng.between(std::max<int64_t>(1, len / 2), len - 1));
    const auto alphabet = static_cast<uint32_t>(tokens_.size());
    uint32_t x = random_pages(rng, 1)[0];
    if (x == s.pages[k] && alphabet > 1)
      x = (x + 1 + static_cast<uint32_t>(rng.below(alphabet - 1))) % alphabet;
    made.pages.assign(s.pages.begin(), s.pages.begin() + static_cast<ptrdiff_t>(k));
    made.pages.push_back(x);
    for (uint32_t p : random_pages(rng, rng.between(0, 2)))
      made.pages.push_back(p);
    // F decodes longer (not so long that most aborts end it): it inserts after S and S + x,
    // which are admitted after it.
    a.output_len = std::min(w_.output_max, w_.output_min + 16);
    Source extended = s;
    extended.pages.push_back(x);
    pending_.push_back(std::move(s));
    pending_.push_back(std::move(extended));
  } else if (move >= 1 && move <= 2) {  // extend: the prompt, then a few more pages
    made.pages = src->pages;
    made.pages.resize(std::min(made.pages.size(), static_cast<size_t>(most - 1)));
    for (uint32_t p : random_pages(rng, rng.between(1, 3)))
      made.pages.push_back(p);
  } else if (move >= 3 && move <= 4) {
    made.pages = fork_inside(rng, *src, most);
  } else if (move == 5 && src->pages.size() >= 2) {  // a suffix, then a few more pages
    const int64_t from = rng.between(1, static_cast<int64_t>(src->pages.size()) - 1);
    made.pages.assign(src->pages.begin() + from, src->pages.end());
    for (uint32_t p : random_pages(rng, rng.between(0, 2)))
      made.pages.push_back(p);
  } else if (move == 6) {  // a block of pages repeated
    const size_t block = static_cast<size_t>(rng.between(1, 3));
    const std::vector<uint32_t> unit =
        rng.chance(0.5) && src->pages.size() >= block
            ? std::vector<uint32_t>(src->pages.begin(), src->pages.begin() + block)
            : random_pages(rng, static_cast<int64_t>(block));
    const auto n = static_cast<size_t>(rng.between(2, std::max<int64_t>(2, longest)));
    for (size_t i = 0; i < n; ++i)
      made.pages.push_back(unit[i % unit.size()]);
  }
  if (made.pages.empty()) made.pages = random_pages(rng, rng.between(1, longest));
  made.pages.resize(std::min(made.pages.size(), static_cast<size_t>(most)));

  a.ns = made.ns;
  a.recipe.clear();
  if (page_ < kLiteralPages) {
    PromptSegment lit{.kind = PromptSegment::Kind::kTokens};
    for (uint32_t p : made.pages)
      lit.items.insert(lit.items.end(), tokens_[p].begin(), tokens_[p].end());
    lit.n = static_cast<int64_t>(lit.items.size());
    a.recipe.push_back(std::move(lit));
  } else {
    for (uint32_t p : made.pages)
      a.recipe.push_back(segments_[p]);
  }
  if (tail > 0) a.recipe.push_back(fresh_tokens(rng, tail, w_.vocab));
  expand_recipe(a.recipe, prompt);
  sources_.push_back(std::move(made));
  if (sources_.size() > kSources) sources_.pop_front();
}

}  // namespace kvsim::sim
