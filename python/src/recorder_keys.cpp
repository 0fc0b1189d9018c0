// CallRecorder's match and insert keys (recorder.h, "Volume"): a match's hit named by the call
// that produced its node and its miss cut to one page past the hit; an insert's key read from
// the tree's path and shared with the last match ("tok_of") as far as the two agree, compared
// token by token or, with page hashes, hash by hash; an insert's value as runs of slots.
#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "core/common/assert.h"
#include "core/tree/token_run.h"
#include "python/src/recorder.h"
#include "python/src/recorder_lines.h"
#include "sim/trace/call_page_hash.h"

namespace kvsim::python {

void CallRecorder::begin_match_key(Namespace ns, PendingKey key) {
  // The tree never reads the unaligned tail; with page hashes it is not recorded.
  if (hash_pages_) key.size = key.size / page_ * page_;
  pending_ = key;
  room(pending_.size * sizeof(Token) + 64);
  mark();
  text("{\"op\":\"match\",\"ns\":");
  num(ns);
  pending_ns_ = ns;
}

void CallRecorder::begin_insert_key(Namespace ns, PendingKey key) {
  pending_ = key;
  room(key.size * (sizeof(Token) + 2 * sizeof(int64_t)) + 64);
  mark();
  text("{\"op\":\"insert\",\"ns\":");
  num(ns);
  pending_ns_ = ns;
}

bool CallRecorder::finish_match(const sim::CallOutcome* out) {
  size_t hit = 0;  // the part named by the call that produced the hit node
  size_t kept = pending_.size;
  std::optional<int64_t> k;
  if (out != nullptr) {
    kept = std::min(pending_.size, static_cast<size_t>(out->amount) + page_);
    if (out->amount > 0) {
      k = producer_of(out->node);
      if (k) hit = static_cast<size_t>(out->amount);
    }
  }
  if (hash_pages_) {
    // The kept miss as page hashes, read from the caller's ids (no copy of them). A call that
    // failed an assertion is written even so, its ids cut to 32 bits (the failure is what
    // the recording is for); a call that went through is dropped instead.
    const size_t pages = (kept - hit) / page_;
    if (match_pages_.size() < pages) match_pages_.resize(pages);
    match_page_count_ = pages;
    if (!pending_.hash(hit, pages, page_, match_pages_.data()) && out != nullptr) {
      drop_call();
      last_match_ = -1;
      return false;
    }
    if (k) tok_of(*k, hit);
    if (pages > 0 || hit == 0) {  // a key names its tokens somehow
      text(",\"pages\":");
      blob_ref(match_pages_.data(), pages);
    }
  } else {
    // The buffer only grows (no zero fill of what the copy overwrites).
    miss_len_ = kept - hit;
    if (miss_buf_.size() < miss_len_) miss_buf_.resize(miss_len_);
    if (!pending_.copy(hit, kept, miss_buf_.data()) && out != nullptr) {
      drop_call();
      last_match_ = -1;
      return false;
    }
    if (k) tok_of(*k, hit);
    if (miss_len_ > 0 || hit == 0) {
      text(",\"tok\":");
      blob_ref(miss_buf_.data(), miss_len_);
    }
  }
  last_match_ = next_index();
  last_match_ns_ = pending_ns_;
  last_match_from_ = hit;  // from here to `kept`, the key is match_pages_ or miss_buf_
  last_match_node_ = hit > 0 ? std::optional<NodeId>(out->node) : std::nullopt;
  return true;
}

void CallRecorder::note_value(size_t begin, const IndexVector& v) {
  if (!value_seen_) {
    value_seen_ = true;
    value_from_ = begin;
    value_size_ = 0;
    runs_.clear();
  } else if (begin != value_from_ + value_size_) {
    value_gap_ = true;  // a range not next to the last: not representable as one run list
    return;
  }
  append_value_runs(v.entries(), v.stride());
  value_size_ += v.size();
}

void CallRecorder::finish_insert(const TreeNode* last) {
  const size_t from = value_seen_ ? value_from_ : pending_.size;
  if (from > 0) {
    text(",\"val_from\":");
    num(from);
  }
  // Slots as runs (start, length): allocators hand out pages of consecutive slots.
  if (!value_seen_) runs_.clear();
  text(",\"val_runs\":");
  blob_ref(runs_.data(), runs_.size() / 2, 2);
  value_seen_ = false;
  value_gap_ = false;
  finish_insert_key(last);
}

void CallRecorder::finish_insert_key(const TreeNode* last) {
  const size_t n = pending_.size;
  segments_.clear();
  if (last == nullptr || !path_segments(*last, n)) {
    rest_.resize(n);
    pending_.copy(0, n, rest_.data());  // a failed call: ids that do not fit are cut
    segments_.assign(1, std::span<const Token>(rest_));
    if (hash_pages_) {
      spell_insert_pages(0, false, n);
    } else {
      spell_insert(0, n);
    }
    return;
  }
  // segments_ now holds the key as the tree's node keys, root first.
  const bool follows_match =
      last_match_ >= 0 && pending_ns_ == last_match_ns_ && path_covers_last_match();
  if (hash_pages_) {
    spell_insert_pages(follows_match ? last_match_from_ : 0, follows_match, n);
    return;
  }
  size_t shared = 0;
  if (follows_match) {
    shared = last_match_from_;
    size_t depth = 0;
    size_t i = 0;  // into miss_buf_
    for (const std::span<const Token> seg : segments_) {
      const size_t end = depth + seg.size();
      depth = end;
      if (end <= last_match_from_) continue;
      const size_t len = std::min(seg.size(), miss_len_ - i);
      const size_t same = common_token_prefix(seg.data(), miss_buf_.data() + i, len);
      shared += same;
      i += same;
      if (same < seg.size()) break;
    }
    if (shared < n) shared = shared / page_ * page_;
  }
  spell_insert(shared, n);
}

// Appends a value's maximal runs of consecutive slots, (start, length) each, to runs_ (a run
// that continues the last one extends it): from one slot per token (stride 1), or from the
// first slots of whole pages (IndexVector::pages, snapshot values), one step per page.
void CallRecorder::append_value_runs(std::span<const SlotIndex> entries, int32_t stride) {
  const auto add = [&](SlotIndex start, int64_t len) {
    const size_t r = runs_.size();
    if (r >= 2 && runs_[r - 2] + runs_[r - 1] == start) {
      runs_[r - 1] += len;
    } else {
      runs_.push_back(start);
      runs_.push_back(len);
    }
  };
  if (stride == 1) {
    for_each_consecutive_run(
        entries, [&](size_t i, size_t j) { add(entries[i], static_cast<int64_t>(j - i)); });
    return;
  }
  const SlotIndex page = stride;
  for (size_t k = 0; k < entries.size();) {
    size_t m = k + 1;
    while (m < entries.size() && entries[m] == entries[m - 1] + page)
      ++m;
    add(entries[k], static_cast<int64_t>(m - k) * page);
    k = m;
  }
}

// The keys of the nodes on the path to `last`, root first, into segments_ (the nodes into
// path_nodes_); false when they are not `n` tokens (the insert's key).
bool CallRecorder::path_segments(const TreeNode& last, size_t n) {
  path_nodes_.clear();
  size_t total = 0;
  for (const TreeNode* p = &last; !p->is_root(); p = p->parent) {
    path_nodes_.push_back(p);
    total += p->key.size();
  }
  if (total != n) return false;
  std::reverse(path_nodes_.begin(), path_nodes_.end());
  for (const TreeNode* p : path_nodes_)
    segments_.push_back(p->key.span());
  return true;
}

// Whether the last match's hit (the path to last_match_node_) starts the path in path_nodes_,
// so that the insert's key equals the match's for last_match_from_ tokens.
bool CallRecorder::path_covers_last_match() const {
  if (!last_match_node_) return last_match_from_ == 0;
  size_t depth = 0;
  for (const TreeNode* p : path_nodes_) {
    depth += p->key.size();
    if (p->id == *last_match_node_) return depth == last_match_from_;
  }
  return false;
}

// Pages of at most kHashPagesFrom tokens: the insert's key (segments_, n tokens), the first
// `shared` named by the last match, the rest spelled out token by token.
void CallRecorder::spell_insert(size_t shared, size_t n) {
  if (shared == n && shared > 0) {
    tok_of(last_match_, shared);
    return;
  }
  text(",\"tok\":[");
  num(blob_.file_off + blob_.len);
  text(",");
  num(n);
  text("]");
  for (const std::span<const Token> seg : segments_)
    blob_.append(seg.data(), seg.size() * sizeof(Token));
}

// Page hashes: the insert's key (segments_, n tokens, node keys of whole pages) past `from`
// hashed page by page; when the insert follows the last match, its leading pages whose hashes
// equal the match's miss pages are named by that match ("tok_of") with the hit before them.
// To replay, equal hashes are equal pages: naming them or listing them gives the same key.
void CallRecorder::spell_insert_pages(size_t from, bool follows_match, size_t n) {
  const size_t pages = (n - from) / page_;
  if (pages_.size() < pages) pages_.resize(pages);
  size_t depth = 0;
  size_t at = 0;
  for (const std::span<const Token> seg : segments_) {
    const size_t begin = from > depth ? std::min(from - depth, seg.size()) : 0;
    depth += seg.size();
    const size_t count = (seg.size() - begin) / page_;
    sim::hash_token_pages(seg.data() + begin, count, page_, pages_.data() + at);
    at += count;
  }
  KV_ASSERT(at == pages, "recorder: an insert's path holds " + std::to_string(at) +
                             " pages past token " + std::to_string(from) + ", its key " +
                             std::to_string(pages));
  size_t same = 0;
  if (follows_match) {
    while (same < pages && same < match_page_count_ && pages_[same] == match_pages_[same])
      ++same;
  }
  const size_t shared = follows_match ? from + same * page_ : 0;
  if (shared > 0) tok_of(last_match_, shared);
  if (shared < n || shared == 0) {
    text(",\"pages\":");
    blob_ref(pages_.data() + same, pages - same);
  }
}

void CallRecorder::hash_into(std::span<const Token> tokens, std::vector<uint64_t>* out) const {
  const size_t n = tokens.size() / page_;
  out->resize(n);
  sim::hash_token_pages(tokens.data(), n, page_, out->data());
}

void CallRecorder::tok_of(int64_t call, size_t count) {
  text(",\"tok_of\":[");
  num(call - base_i());
  text(",");
  num(count);
  text("]");
}

}  // namespace kvsim::python
