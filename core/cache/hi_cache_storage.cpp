// HiCache storage tier: page-hash bookkeeping, backup of written-through pages to storage,
// and prefetch from storage into the host pool (SGLang's L3 path), with the storage "threads"
// emulated by explicit step calls so the simulator owns their interleaving.
#include <algorithm>
#include <cstring>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tiers/page_hash.h"

namespace kvsim {
namespace {

// [prefetch.rate_limit] The reference of the prefetch rate limit (SGLang's
// prefetch_capacity_limit = int(fraction * host size), refused at or above it), kept plain and
// apart from the cached counter: the tokens of the live prefetches, summed afresh.
bool reference_rate_limited(const std::map<RequestId, PrefetchOp>& live,
                            const HiCacheOptions& options) {
  int64_t occupied = 0;
  for (const auto& [rid, op] : live)
    occupied += static_cast<int64_t>(op.tokens.size());
  const double capacity =
      options.prefetch_capacity_fraction * static_cast<double>(options.host_tokens);
  return occupied >= static_cast<int64_t>(capacity);
}

// [prefetch.deadline] The reference deadline (SGLang's prefetch_timeout_base +
// prefetch_timeout_per_ki_token * tokens / 1024, never past prefetch_timeout_max), from the
// tokens the rate limit counts rather than the token list.
uint64_t reference_deadline_ticks(const PrefetchOp& op, const HiCacheOptions& options) {
  const auto tokens = static_cast<uint64_t>(op.occupied_tokens);
  const uint64_t linear = options.prefetch_timeout_base_ticks +
                          tokens * options.prefetch_timeout_per_ki_token_ticks / 1024;
  return linear > options.prefetch_timeout_max_ticks ? options.prefetch_timeout_max_ticks : linear;
}

// [prefetch.query_threshold] The reference of the query's decision: a prefetch goes on only
// when the store holds at least one page and at least the threshold's tokens of it.
bool reference_query_keeps(size_t hit_pages, const HiCacheOptions& options) {
  const auto hit_tokens = static_cast<int64_t>(hit_pages) * options.page_size;
  return hit_pages > 0 && !(hit_tokens < options.prefetch_threshold_tokens);
}

}  // namespace

PageDigest HiCache::last_hash(TreeNode& node) {
  KV_ASSERT(!node.is_root(), "the root has no page hash; use namespace_seed");
  compute_node_hashes(node);
  return node.hash_value.back();
}

void HiCache::compute_node_hashes(TreeNode& node) {
  if (node.is_root() || !node.hash_value.empty()) return;
  const PageDigest prev =
      node.parent->is_root() ? namespace_seed(node.ns) : last_hash(*node.parent);
  node.hash_value = hash_pages(prev, node.key, options_.page_size);
}

size_t HiCache::page_payload_bytes() const {
  const KVPoolView& view = host_pool_->view();
  return static_cast<size_t>(options_.page_size) * static_cast<size_t>(view.layer_count) *
         view.item_bytes;
}

std::vector<std::byte> HiCache::read_host_page(const IndexVector& slots, size_t first) const {
  const KVPoolView view = host_pool_->view();
  const auto page = static_cast<size_t>(options_.page_size);
  std::vector<std::byte> out(page * static_cast<size_t>(view.layer_count) * view.item_bytes);
  std::byte* dst = out.data();
  for (size_t i = first; i < first + page; ++i) {
    for (int32_t layer = 0; layer < view.layer_count; ++layer) {
      std::memcpy(dst, view.block.ptr + view.offset(layer, slots[i]), view.item_bytes);
      dst += view.item_bytes;
    }
  }
  return out;
}

void HiCache::write_host_page(const IndexVector& slots, size_t first,
                              std::span<const std::byte> page_bytes) {
  const KVPoolView view = host_pool_->view();
  const auto page = static_cast<size_t>(options_.page_size);
  KV_ASSERT(page_bytes.size() == page_payload_bytes(), "page payload size");
  const std::byte* src = page_bytes.data();
  for (size_t i = first; i < first + page; ++i) {
    for (int32_t layer = 0; layer < view.layer_count; ++layer) {
      std::memcpy(view.block.ptr + view.offset(layer, slots[i]), src, view.item_bytes);
      src += view.item_bytes;
    }
  }
}

void HiCache::enqueue_storage_backup(TreeNode& node) {
  compute_node_hashes(node);
  tree_->protect_host(node);  // host pages must stay until the backup has read them
  backups_.push_back(PendingBackup{node.id, node.hash_value, *node.full().host_value, 0});
}

bool HiCache::storage_backup_step() {
  const StorageStepBefore before = check_backup_step_before();
  const bool did = backup_once();
  const std::string broken = check_backup_step(before, did);
  KV_ASSERT(broken.empty(), "storage.step_result: " + broken);
  return did;
}

std::string HiCache::check_backup_step(const StorageStepBefore& before, bool did) const {
  if (did != (before.backups > 0)) {
    return "storage_backup_step returns " + std::string(did ? "true" : "false") + " with " +
           std::to_string(before.backups) + " backup(s) queued";
  }
  if (!did) return "";
  const int64_t written = stats_.backed_up_pages - before.stats.backed_up_pages;
  const int64_t failed = stats_.storage_write_failures - before.stats.storage_write_failures;
  const auto processed = static_cast<size_t>(written + failed);
  const bool popped = backups_.size() + 1 == before.backups;
  const bool ends = failed == 1 || before.pages_done + processed == before.pages;
  const size_t done_now = popped || backups_.empty() ? 0 : backups_.front().pages_done;
  if (written < 0 || failed < 0 || failed > 1 || processed == 0 ||
      processed > static_cast<size_t>(options_.storage_batch_pages) ||
      before.pages_done + processed > before.pages || popped != ends ||
      (!popped &&
       (backups_.size() != before.backups || done_now != before.pages_done + processed)) ||
      (popped && (finished_backups_.size() != before.finished + 1 ||
                  finished_backups_.back() != before.node)) ||
      stats_.storage_written_bytes - before.stats.storage_written_bytes !=
          written * static_cast<int64_t>(page_payload_bytes())) {
    return "a backup step of node " + std::to_string(before.node) + " (page " +
           std::to_string(before.pages_done) + " of " + std::to_string(before.pages) + ") wrote " +
           std::to_string(written) + " page(s), failed " + std::to_string(failed) + ", " +
           (popped ? "finished the backup" : "left it at page " + std::to_string(done_now)) +
           " with " + std::to_string(finished_backups_.size() - before.finished) + " new ack(s)";
  }
  return "";
}

bool HiCache::backup_once() {
  if (backups_.empty()) return false;
  PendingBackup& b = backups_.front();
  const auto page = static_cast<size_t>(options_.page_size);
  const size_t end =
      std::min(b.hashes.size(), b.pages_done + static_cast<size_t>(options_.storage_batch_pages));
  bool failed = false;
  for (; b.pages_done < end && !failed; ++b.pages_done) {
    const std::vector<std::byte> bytes = read_host_page(b.host_indices, b.pages_done * page);
    failed = storage_->set(b.hashes[b.pages_done], bytes) != StorageStatus::kOk;
    if (failed) {
      ++stats_.storage_write_failures;
    } else {
      ++stats_.backed_up_pages;
      stats_.storage_written_bytes += static_cast<int64_t>(bytes.size());
    }
  }
  KV_PROBE_IF(failed, st_backup_set_fails);
  KV_PROBE_IF(!failed && b.pages_done < b.hashes.size(), st_backup_multi_batch);
  if (failed || b.pages_done == b.hashes.size()) {  // a failed batch stops the backup; ack anyway
    finished_backups_.push_back(b.node);
    backups_.erase(backups_.begin());
  }
  return true;
}

uint64_t HiCache::prefetch_timeout_ticks(const PrefetchOp& op) const {
  const uint64_t t =
      options_.prefetch_timeout_base_ticks +
      options_.prefetch_timeout_per_ki_token_ticks * static_cast<uint64_t>(op.tokens.size()) / 1024;
  return std::min(t, options_.prefetch_timeout_max_ticks);
}

bool HiCache::prefetch_from_storage(RequestId rid, Namespace ns, TreeNode& anchor,
                                    std::span<const Token> tokens, uint64_t now_tick) {
  const StorageStepBefore before = check_prefetch_start_before(rid, anchor);
  const bool started = start_prefetch(rid, ns, anchor, tokens, now_tick);
  const std::string broken =
      check_prefetch_start(rid, ns, anchor, tokens, now_tick, before, started);
  KV_ASSERT(broken.empty(), "prefetch.start_result: " + broken);
  return started;
}

std::string HiCache::check_prefetch_start(RequestId rid, Namespace ns, const TreeNode& anchor,
                                          std::span<const Token> tokens, uint64_t now_tick,
                                          const StorageStepBefore& before, bool started) const {
  // Recomputed apart: the anchor's depth by a walk up, the page-aligned rest; the rate limit is
  // decided on the occupied tokens counted before the call (whether that count is right is
  // prefetch.rate_limit's question, sanity_check).
  size_t depth = 0;
  for (const TreeNode* n = &anchor; !n->is_root(); n = n->parent)
    depth += n->key.size();
  const auto page = static_cast<size_t>(options_.page_size);
  const size_t rest = tokens.size() > depth ? (tokens.size() - depth) / page * page : 0;
  const bool limited =
      before.occupied >= static_cast<int64_t>(options_.prefetch_capacity_fraction *
                                              static_cast<double>(options_.host_tokens));
  const bool worth = storage_ != nullptr && !before.had_prefetch && rest > 0 &&
                     static_cast<int64_t>(rest) >= options_.prefetch_threshold_tokens && !limited;
  const std::string who = "prefetch_from_storage of request " + std::to_string(rid) + " (" +
                          std::to_string(tokens.size()) + " tokens below a " +
                          std::to_string(depth) + "-token anchor, " +
                          (before.had_prefetch ? "already prefetching" : "not prefetching") +
                          (limited ? ", rate limited" : "") + ")";
  if (started != worth) return who + (started ? " started one" : " was refused");
  if (!started) {
    if (prefetches_.size() != before.prefetches || prefetch_tokens_occupied_ != before.occupied ||
        anchor.full().host_lock_ref != before.host_locks) {
      return who +
             " refused, yet changed the live prefetches, their tokens or the anchor's "
             "host protection";
    }
    return "";
  }
  const auto it = prefetches_.find(rid);
  if (it == prefetches_.end() || prefetches_.size() != before.prefetches + 1) {
    return who + " started, but no prefetch of the request is live";
  }
  const PrefetchOp& op = it->second;
  const auto occupied = static_cast<int64_t>(rest);
  if (op.rid != rid || op.anchor != anchor.id || op.ns != ns ||
      op.state != PrefetchOp::State::kQuery || op.tokens.size() != rest ||
      !std::equal(op.tokens.begin(), op.tokens.end(), tokens.begin() + static_cast<long>(depth)) ||
      op.hashes.size() != rest / page || op.occupied_tokens != occupied || op.hit_tokens != 0 ||
      op.host_indices || op.completed_tokens != 0 || op.terminated || op.start_tick != now_tick ||
      prefetch_tokens_occupied_ != before.occupied + occupied ||
      anchor.full().host_lock_ref != before.host_locks + 1) {
    return who + " started a prefetch whose fields disagree with the call: rid " +
           std::to_string(op.rid) + ", anchor " + std::to_string(op.anchor) + ", ns " +
           std::to_string(op.ns) + ", " + std::to_string(op.tokens.size()) + " tokens, " +
           std::to_string(op.hashes.size()) + " page keys, " + std::to_string(op.occupied_tokens) +
           " occupied, start tick " + std::to_string(op.start_tick) + " (call at " +
           std::to_string(now_tick) + "), occupied total " +
           std::to_string(prefetch_tokens_occupied_) + " (was " + std::to_string(before.occupied) +
           "), anchor host locks " + std::to_string(anchor.full().host_lock_ref) + " (was " +
           std::to_string(before.host_locks) + ")";
  }
  return "";
}

bool HiCache::start_prefetch(RequestId rid, Namespace ns, TreeNode& anchor,
                             std::span<const Token> tokens, uint64_t now_tick) {
  if (storage_ == nullptr || prefetches_.count(rid) != 0) return false;
  KV_ASSERT(anchor.backed_up(), "prefetch anchor must have a host copy");
  const size_t page = static_cast<size_t>(options_.page_size);
  const size_t depth = RadixTree::prefix_tokens(anchor).size();
  if (tokens.size() <= depth) return false;
  std::span<const Token> rest = tokens.subspan(depth);
  rest = rest.first(rest.size() / page * page);
  const int64_t threshold =
      std::max<int64_t>(options_.prefetch_threshold_tokens, options_.page_size);
  if (static_cast<int64_t>(rest.size()) < threshold) return false;
  const auto limit = static_cast<int64_t>(options_.prefetch_capacity_fraction *
                                          static_cast<double>(options_.host_tokens));
  if (reference_rate_limited(prefetches_, options_) != (prefetch_tokens_occupied_ >= limit)) {
    ++stats_.prefetch_rate_divergences;
  }
  if (prefetch_tokens_occupied_ >= limit) {
    KV_PROBE(st_prefetch_rate_limited);
    return false;  // rate limited
  }

  PrefetchOp op;
  op.rid = rid;
  op.anchor = anchor.id;
  KV_ASSERT(anchor.is_root() || anchor.ns == ns, "prefetch across namespaces");
  op.ns = ns;
  op.tokens.assign(rest.begin(), rest.end());
  const PageDigest prev = anchor.is_root() ? namespace_seed(op.ns) : last_hash(anchor);
  op.hashes = hash_pages(prev, op.tokens, options_.page_size);
  op.occupied_tokens = static_cast<int64_t>(op.tokens.size());
  op.start_tick = now_tick;
  tree_->protect_host(anchor);
  prefetch_tokens_occupied_ += op.occupied_tokens;
  prefetches_.emplace(rid, std::move(op));
  return true;
}

bool HiCache::storage_query_step() {
  const StorageStepBefore before = check_query_step_before();
  const bool did = query_once();
  const std::string broken = check_query_step(before, did);
  KV_ASSERT(broken.empty(), "storage.step_result: " + broken);
  return did;
}

std::string HiCache::check_query_step(const StorageStepBefore& before, bool did) const {
  if (did != (before.prefetches > 0)) {
    return "storage_query_step returns " + std::string(did ? "true" : "false") + " with " +
           std::to_string(before.prefetches) + " prefetch(es) querying";
  }
  if (!did) return "";
  size_t querying = 0;
  for (const auto& [rid, op] : prefetches_)
    querying += op.state == PrefetchOp::State::kQuery ? 1 : 0;
  const auto it = prefetches_.find(before.rid);
  const int64_t hit_pages = stats_.storage_query_hit_pages - before.stats.storage_query_hit_pages;
  if (querying + 1 != before.prefetches || it == prefetches_.end()) {
    return "a query step left " + std::to_string(querying) + " of " +
           std::to_string(before.prefetches) + " prefetch(es) querying";
  }
  const PrefetchOp& op = it->second;
  const bool hit = op.state == PrefetchOp::State::kHit;
  if ((!hit && op.state != PrefetchOp::State::kRevoked) ||
      op.hit_tokens != hit_pages * options_.page_size ||
      (hit && static_cast<int64_t>(op.hashes.size()) != hit_pages)) {
    return "the query of request " + std::to_string(before.rid) + " found " +
           std::to_string(hit_pages) + " page(s) and left it in state " +
           std::to_string(static_cast<int>(op.state)) + " with " + std::to_string(op.hit_tokens) +
           " hit tokens and " + std::to_string(op.hashes.size()) + " page keys";
  }
  return "";
}

bool HiCache::query_once() {
  for (auto& [rid, op] : prefetches_) {
    if (op.state != PrefetchOp::State::kQuery) continue;
    const size_t hit_pages = storage_->batch_exists(op.hashes);
    stats_.storage_query_hit_pages += static_cast<int64_t>(hit_pages);
    op.hit_tokens = static_cast<int64_t>(hit_pages) * options_.page_size;
    // A hit of no page is nothing to prefetch, whatever the threshold (0 is a valid one).
    const bool revoke = hit_pages == 0 || op.hit_tokens < options_.prefetch_threshold_tokens;
    if (revoke == reference_query_keeps(hit_pages, options_)) {
      ++stats_.prefetch_query_divergences;
    }
    if (revoke) {
      KV_PROBE(st_query_revoked);
      op.state = PrefetchOp::State::kRevoked;
    } else {
      KV_PROBE_IF(hit_pages < op.hashes.size(), st_query_partial_hit);
      KV_PROBE_IF(op.ns != 0, st_query_hit_namespace);
      op.hashes.resize(hit_pages);
      op.state = PrefetchOp::State::kHit;
    }
    return true;
  }
  return false;
}

void HiCache::drain_prefetch_hits() {
  const int64_t page = options_.page_size;
  for (auto& [rid, op] : prefetches_) {
    if (op.state != PrefetchOp::State::kHit) continue;
    std::optional<IndexVector> host = alloc_host(op.hit_tokens);
    if (!host) {
      // Seed 004: shrink to the largest page-aligned length that fits, if still worth it.
      const int64_t fit = host_slots_->available_size() / page * page;
      if (fit >= options_.prefetch_threshold_tokens && fit > 0) {
        host = host_slots_->alloc(fit);
        op.hit_tokens = fit;
        op.hashes.resize(static_cast<size_t>(fit / page));
        ++stats_.prefetch_shrunk;
        KV_PROBE(st_prefetch_shrunk);
      }
    }
    if (!host) {
      // Giving up is right only when what is free is not worth a prefetch (seed 004).
      const int64_t free_now = host_slots_->available_size() / page * page;
      if (free_now > 0 && free_now >= options_.prefetch_threshold_tokens) {
        ++stats_.prefetch_abandoned_with_free_memory;
      }
      KV_PROBE(st_prefetch_no_host);
      op.state = PrefetchOp::State::kRevoked;
      continue;
    }
    // A transfer carries at least one page, is worth a prefetch and has a host slot per token:
    // whatever the drain shrank it to, it would otherwise have been revoked.
    KV_ASSERT(op.hit_tokens > 0 && op.hit_tokens % page == 0 &&
                  op.hit_tokens >= options_.prefetch_threshold_tokens &&
                  static_cast<int64_t>(host->size()) == op.hit_tokens &&
                  op.hashes.size() == static_cast<size_t>(op.hit_tokens / page),
              "prefetch handed to transfer with " + std::to_string(op.hit_tokens) +
                  " hit tokens, " + std::to_string(host->size()) + " host slots and " +
                  std::to_string(op.hashes.size()) + " page keys (page " + std::to_string(page) +
                  ", threshold " + std::to_string(options_.prefetch_threshold_tokens) + ")");
    op.host_indices = std::move(host);
    op.state = PrefetchOp::State::kTransfer;
  }
}

bool HiCache::storage_io_step() {
  const StorageStepBefore before = check_io_step_before();
  const bool did = io_once();
  const std::string broken = check_io_step(before, did);
  KV_ASSERT(broken.empty(), "storage.step_result: " + broken);
  return did;
}

std::string HiCache::check_io_step(const StorageStepBefore& before, bool did) const {
  if (did != (before.prefetches > 0)) {
    return "storage_io_step returns " + std::string(did ? "true" : "false") + " with " +
           (before.prefetches > 0 ? "a" : "no") + " prefetch left to read";
  }
  if (!did) return "";
  const auto it = prefetches_.find(before.rid);
  if (it == prefetches_.end()) return "an I/O step dropped prefetch " + std::to_string(before.rid);
  const PrefetchOp& op = it->second;
  const int64_t read = op.completed_tokens - static_cast<int64_t>(before.pages_done);
  const int64_t pages = stats_.storage_hit_pages - before.stats.storage_hit_pages;
  const int64_t failures = (stats_.storage_miss_pages - before.stats.storage_miss_pages) +
                           (stats_.storage_read_errors - before.stats.storage_read_errors) +
                           (stats_.storage_corrupt_pages - before.stats.storage_corrupt_pages);
  // Each step reads at least a page or ends the prefetch on the page it could not read.
  if (read < 0 || read != pages * options_.page_size || pages > options_.storage_batch_pages ||
      op.completed_tokens > op.hit_tokens || failures != (op.terminated ? 1 : 0) ||
      (read == 0 && !op.terminated) ||
      stats_.storage_read_bytes - before.stats.storage_read_bytes !=
          pages * static_cast<int64_t>(page_payload_bytes())) {
    return "an I/O step of request " + std::to_string(before.rid) + " moved its read tokens from " +
           std::to_string(before.pages_done) + " to " + std::to_string(op.completed_tokens) +
           " (of " + std::to_string(op.hit_tokens) + ") counting " + std::to_string(pages) +
           " page(s) read and " + std::to_string(failures) + " failure(s); terminated " +
           (op.terminated ? "yes" : "no");
  }
  return "";
}

bool HiCache::io_once() {
  const auto page = static_cast<size_t>(options_.page_size);
  for (auto& [rid, op] : prefetches_) {
    if (op.state != PrefetchOp::State::kTransfer || op.terminated ||
        op.completed_tokens == op.hit_tokens) {
      continue;
    }
    std::vector<std::byte> bytes;
    for (int64_t n = 0; n < options_.storage_batch_pages && op.completed_tokens < op.hit_tokens;
         ++n) {
      const size_t k = static_cast<size_t>(op.completed_tokens) / page;
      // A miss, an unreadable page or a payload of the wrong size (another model's page, a
      // foreign writer) all end the prefetch: what was read before it stays usable. A damaged
      // page or one of the wrong size is removed, so the next backup of it rewrites it (the
      // store heals); an I/O error may be passing, so that page stays.
      const StorageStatus status = storage_->get(op.hashes[k], &bytes);
      if (status != StorageStatus::kOk || bytes.size() != page_payload_bytes()) {
        KV_PROBE_IF(op.completed_tokens > 0, st_read_fails_mid_prefetch);
        if (status == StorageStatus::kMiss) {
          KV_PROBE(st_read_miss_after_hit);
          ++stats_.storage_miss_pages;
        } else if (status == StorageStatus::kIoError) {
          KV_PROBE(st_read_io_error);
          ++stats_.storage_read_errors;
        } else {
          KV_PROBE(st_read_corrupt_removed);
          ++stats_.storage_corrupt_pages;
          storage_->remove(op.hashes[k]);
        }
        op.terminated = true;
        break;
      }
      ++stats_.storage_hit_pages;
      stats_.storage_read_bytes += static_cast<int64_t>(bytes.size());
      write_host_page(*op.host_indices, k * page, bytes);  // written before it is counted
      op.completed_tokens += options_.page_size;
    }
    return true;
  }
  return false;
}

bool HiCache::check_prefetch_progress(RequestId rid, uint64_t now_tick) {
  auto it = prefetches_.find(rid);
  if (it == prefetches_.end()) return true;
  PrefetchOp& op = it->second;
  if (op.state == PrefetchOp::State::kRevoked) {
    revoke_prefetch(op);
    return true;
  }
  const uint64_t deadline = prefetch_timeout_ticks(op);
  if (deadline != reference_deadline_ticks(op, options_)) {
    ++stats_.prefetch_deadline_divergences;
  }
  const bool timed_out = now_tick - op.start_tick > deadline;
  const bool complete = op.state == PrefetchOp::State::kTransfer &&
                        (op.completed_tokens == op.hit_tokens || op.terminated);
  bool can_terminate = false;
  switch (options_.prefetch_stop_policy) {
    case PrefetchStopPolicy::kBestEffort:
      can_terminate = true;
      break;
    case PrefetchStopPolicy::kWaitComplete:
      can_terminate = complete;
      break;
    case PrefetchStopPolicy::kTimeout:
      can_terminate = complete || timed_out;
      break;
  }
  if (!can_terminate) return false;
  KV_PROBE_IF(
      !complete && timed_out && options_.prefetch_stop_policy == PrefetchStopPolicy::kTimeout,
      st_prefetch_timeout);
  if (op.state != PrefetchOp::State::kTransfer) {
    KV_PROBE(st_prefetch_revoked_early);
    revoke_prefetch(op);  // host memory was never committed
    return true;
  }
  finish_prefetch(op);
  return true;
}

void HiCache::revoke_prefetch(PrefetchOp& op) {
  if (op.host_indices) host_slots_->free(*op.host_indices);
  ++stats_.prefetch_revoked;
  drop_prefetch(op.rid);
}

void HiCache::finish_prefetch(PrefetchOp& op) {
  op.terminated = true;  // completed_tokens is frozen from here on
  KV_PROBE_IF(op.completed_tokens < op.hit_tokens, st_prefetch_partial_finish);
  const auto usable = static_cast<size_t>(op.completed_tokens);
  TreeNode* anchor = tree_->find(op.anchor);
  KV_ASSERT(anchor != nullptr, "host-protected prefetch anchor vanished");
  const IndexVector& host = *op.host_indices;
  size_t present = 0;
  size_t inserted = 0;
  if (usable > 0) {
    const HostInsertResult r = tree_->insert_host(
        op.ns, *anchor, std::span<const Token>(op.tokens).first(usable), host.slice(0, usable),
        std::span<const PageDigest>(op.hashes).first(usable /
                                                     static_cast<size_t>(options_.page_size)));
    KV_PROBE_IF(r.present_len > 0, st_finish_overlap);
    KV_PROBE_IF(r.refused_len > 0, st_finish_refused);
    present = static_cast<size_t>(r.present_len);
    inserted = static_cast<size_t>(r.inserted_len);
  }
  // [present, present + inserted) now belongs to the tree; everything else goes back.
  if (present > 0) host_slots_->free(host.slice(0, present));
  if (present + inserted < host.size()) {
    host_slots_->free(host.slice(present + inserted, host.size()));
  }
  prefetch_loaded_[op.rid] = static_cast<int64_t>(inserted);
  stats_.prefetched_tokens += static_cast<int64_t>(inserted);
  KV_VERIFY(check_finished_prefetch(op, *anchor, present, inserted).empty(),
            check_finished_prefetch(op, *anchor, present, inserted));
  drop_prefetch(op.rid);
}

void HiCache::drop_prefetch(RequestId rid) {
  auto it = prefetches_.find(rid);
  KV_ASSERT(it != prefetches_.end(), "drop of an unknown prefetch");
  if (TreeNode* anchor = tree_->find(it->second.anchor)) tree_->release_host(*anchor);
  prefetch_tokens_occupied_ -= it->second.occupied_tokens;
  prefetches_.erase(it);
}

void HiCache::release_aborted_request(RequestId rid) {
  pop_prefetch_loaded_tokens(rid);  // a finished prefetch's tokens go with their request
  auto it = prefetches_.find(rid);
  if (it == prefetches_.end()) return;
  KV_PROBE(st_abort_during_prefetch);
  it->second.terminated = true;
  revoke_prefetch(it->second);
}

int64_t HiCache::pop_prefetch_loaded_tokens(RequestId rid) {
  auto it = prefetch_loaded_.find(rid);
  if (it == prefetch_loaded_.end()) return 0;
  const int64_t n = it->second;
  prefetch_loaded_.erase(it);
  stats_.prefetch_reported_tokens += n;
  return n;
}

}  // namespace kvsim
