"""Failures the blind hunt reported at fix commits and at the newest snapshot (issue 31), triaged
(docs/sglang-hunt.md "Triage of the other failures"). Each trace is the hunt's find, shrunk, and is
replayed by kvsim against SGLang's code (needs the built binary; skips without it or the bundle).

- storage_key_ignores_namespace*.trace.jsonl (swarm seed 5): a real SGLang bug. HiCache's storage
  keys hash a page's tokens only, not the request's extra_key, so identical prefixes of two
  namespaces (LoRA adapters) share one storage page: the store keeps the first namespace's KV under
  the key the second one's node backs up to. Every tag of the bundle has it (the newest needs its
  own shrink: the April trace's admissions differ there); upstream SGLang fixed it after the
  snapshot (sgl-project/sglang#38577).
- unified_write_back_evict.trace.jsonl (swarm seed 7): a real SGLang bug at seed 002's parent and
  fix. UnifiedRadixCache with write-back evicts a device leaf by queueing its device-to-host copy
  and freeing its slots at once; the next forward rewrites the slots before the copy runs, so the
  host holds another prefix's KV. SGLang fixed it in e547f3f804 (#24585: evict waits for its
  write-backs), which no tag of the bundle holds; no later tag builds the SWA target.
- prefetch_key_not_truncated.trace.jsonl (named file_storage_budget, seed 2): a real SGLang bug
  from 233048212a (#23631) to f65aae8493 (#25991). When the host pool cannot hold a whole
  prefetch, prefetch_from_storage shrinks the token list but hands the controller the unshrunk
  prefetch key, so the storage pages outrun the host indices (IndexError in _generic_page_get).
  Clean at seed 004's fix (before it) and at the newest snapshot (after the fix).
- himamba_mamba_only_load.trace.jsonl (hybrid_delayed_completions, seed 4): a harness false alarm
  (a KeyError in HiMambaRadixCache.loading_check), kept as a regression: the driver neither started
  a load-back that restores only a Mamba state nor made the forward wait on the Mamba layers'
  load events, as SGLang's scheduler and mamba2_layer_cache do. Clean at seed 001's fix.
- hiradix_write_back_host_leaf.trace.jsonl (write_back_pressure, seed 42, no inject): a real SGLang bug
  (AssertionError 'parent does not have child key' in HiRadixCache.evict_host). Write-back
  eviction demotes a backed-up parent while its child's write-back is still staged on the device,
  so _update_host_leaf_status (which then counted only evicted children) marks the parent a host
  leaf, and nothing clears the mark when the child is demoted; evict_host later takes the parent
  twice. Fixed by 530b497a48 (#23537, 2026-04-30: a child that is backed up keeps its parent off
  the host leaves): fails at every April tag, clean from e264b5785d on. evict_host runs because
  the tree's own copies fill the host (the first shrink, of seed 14, needed the host-full inject).
- himamba_read_waits_mamba_layers.trace.jsonl (hybrid_delayed_completions, seed 46): a harness
  false alarm, a second path to the KeyError above: the read after admission (the batch's
  forward) waited on the FULL layers only, and the request was retracted before its own compute.
  Clean at seed 001's fix.
- himamba_evict_host_deletes_written_back_node.trace.jsonl (swarm seed 421, faults off): a real
  SGLang bug at every tag that builds HiMamba, the newest included. A write-back eviction demotes
  a leaf, then writes back its parent (a Mamba tombstone); the host is full, so write_backup calls
  evict_host, which evicts the leaf just demoted, and its tombstone cascade deletes the parent
  (its device KV freed, its evictable size taken off). write_backup then copies the freed slots
  and _evict_to_host demotes the deleted node: evictable size counted twice, slots freed twice.
- himamba_evict_host_deletes_written_back_node.host_smaller.trace.jsonl (swarm seed 2 at the
  newest snapshot, the only tag here whose host pools accept a host pool smaller than the device
  pool: 85 and 99 tokens): the same bug, 869 ops shrunk to 21. Traced with a diagnostic wrapper:
  _evict_device_leaf(12) -> write_backup(12) -> evict_host -> _evict_host_leaf(13), whose cascade
  deletes nodes 12 and 11; then _evict_to_host(12) and _evict_device_leaf(11) act on deleted nodes.
- himamba_selective_double_free.trace.jsonl (swarm seed 121, selective write-through): a real SGLang
  bug of the same cascade family: a device slot freed twice (first _evict_regular, then the
  cascade under write_backup -> evict_mamba_host); 491 ops, replayed at 21835fb0af only.
- himamba_write_back_sizes.trace.jsonl (swarm seed 209), unified_evict_to_host_not_backed_up
  .trace.jsonl (swarm seed 263) and mamba_units/seed2_write_back_host_full: harness false alarms
  of the host-full inject (target 0), which held every free host page. Without a storage tier
  SGLang has no holder of host pages outside the tree, and its host pool is larger than its
  device pool (asserted at construction), so a write-back's evict_host always finds room; the
  inject now leaves that room (driver._host_hold_limit)."""

import os
import shutil
import subprocess

import pytest
from sglang_src import cache_dir, kvsim_env, sglang_checkout

NEWEST, FIX001, FIX004 = "sglang-6ed5780c4f", "sglang-21835fb0af", "sglang-4a04a9818e"
PARENT002, FIX002, PARENT003 = "sglang-c016246b0f", "sglang-e4378ff37f", "sglang-e264b5785d"
EFA, FIX003 = "sglang-efa71ce5ab", "sglang-ec4560304b"
_TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triage_traces")


def _replay(trace, tag, src=None):
    """Replays `trace` at the bundle's `tag`, or at the SGLang tree `src` when given."""
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    sglang_checkout(tag)
    env = kvsim_env()
    r = subprocess.run([exe, "replay", os.path.join(_TRACES, trace), "--sglang-src", src or f"bundle:{tag}",
                        "--expect-clean"], capture_output=True, text=True, env=env, timeout=300)
    return r, r.stdout + r.stderr


@pytest.mark.parametrize("trace,tag", [
    ("storage_key_ignores_namespace.trace.jsonl", FIX004),
    ("storage_key_ignores_namespace.trace.jsonl", FIX002),
    ("storage_key_ignores_namespace.newest.trace.jsonl", NEWEST)])
def test_storage_keys_shared_across_namespaces(trace, tag):
    r, out = _replay(trace, tag)
    assert r.returncode == 1 and "VIOLATION of storage.content" in out, out
    assert "the store's page under its hash differs from the node's host page" in out, out


@pytest.mark.parametrize("tag", [PARENT002, FIX002])
def test_unified_write_back_eviction_frees_slots_before_the_copy(tag):
    r, out = _replay("unified_write_back_evict.trace.jsonl", tag)
    assert r.returncode == 1 and "VIOLATION of content" in out, out
    assert "host KV" in out, out


@pytest.mark.parametrize("tag,fails", [(FIX004, False), (PARENT003, True), (FIX002, True), (NEWEST, False)])
def test_prefetch_key_not_truncated_with_the_host_indices(tag, fails):
    r, out = _replay("prefetch_key_not_truncated.trace.jsonl", tag)
    if fails:
        assert r.returncode == 1 and "IndexError" in out and "_generic_page_get" in out, out
    else:
        assert r.returncode == 0, out


def test_mamba_only_load_back_is_started_and_waited_for():
    r, out = _replay("himamba_mamba_only_load.trace.jsonl", FIX001)
    assert r.returncode == 0, out


# The fix (530b497a48) lies between seed 004's fix (2026-04-28) and seed 003's parent (2026-05-07).
@pytest.mark.parametrize("tag,fails", [(EFA, True), (FIX001, True), (FIX004, True), (PARENT003, False), (NEWEST, False)])
def test_write_back_eviction_leaves_a_stale_host_leaf(tag, fails):
    r, out = _replay("hiradix_write_back_host_leaf.trace.jsonl", tag)
    if fails:
        assert r.returncode == 1 and "parent does not have child key" in out and "(evict_host)" in out, out
    else:
        assert r.returncode == 0, out


def test_read_after_admission_waits_on_the_mamba_layers():
    # A request admitted with a Mamba-only load-back and retracted before its own compute: the
    # forward's read must have waited on the Mamba layers, or the load outlives the retract.
    r, out = _replay("himamba_read_waits_mamba_layers.trace.jsonl", FIX001)
    assert r.returncode == 0, out


def test_a_plain_source_tree_replays_as_its_tag(tmp_path):
    # How a trace is replayed at an upstream commit outside the bundle (530b497a48 above): its
    # sliced files in a folder with no git and no commit stamp. The driver knows no commit there;
    # kvsim once aborted on the hello's null commit.
    src = sglang_checkout(FIX001)
    shutil.copytree(src.python_dir, tmp_path / "python", symlinks=True)
    r, out = _replay("hiradix_write_back_host_leaf.trace.jsonl", FIX001, src=str(tmp_path))
    assert r.returncode == 1 and "parent does not have child key" in out, out


# No fix in the fork's history up to the newest snapshot (2026-08-22).
@pytest.mark.parametrize("tag", [FIX001, FIX004, FIX002, NEWEST])
def test_evict_host_deletes_the_node_being_written_back(tag):
    r, out = _replay("himamba_evict_host_deletes_written_back_node.trace.jsonl", tag)
    assert r.returncode == 1 and "VIOLATION of sizes.component" in out, out
    assert "full: evictable -10" in out, out  # the parent's 10 tokens taken off twice


def test_evict_host_deletes_the_node_being_written_back_with_a_smaller_host_pool():
    # Earlier tags assert a host pool larger than the device pool; the newest accepts it.
    r, out = _replay("himamba_evict_host_deletes_written_back_node.host_smaller.trace.jsonl", NEWEST)
    assert r.returncode == 1 and "VIOLATION of sizes.component" in out, out
    assert "full: evictable -3" in out, out  # nodes 12 and 11 taken off twice


@pytest.mark.parametrize("tag", [FIX001, FIX004, FIX002])
def test_the_host_full_inject_leaves_the_write_back_its_room(tag):
    # Seed 209's 25 ops reached the bug above only through an inject holding the whole host.
    r, out = _replay("himamba_write_back_sizes.trace.jsonl", tag)
    assert r.returncode == 0, out


@pytest.mark.parametrize("tag", [PARENT002, FIX003, FIX002])
def test_unified_write_back_eviction_finds_host_room(tag):
    # The demotion of a node without a host copy is gone. The run then ends in the write-back bug
    # of test_unified_write_back_eviction_frees_slots_before_the_copy (fixed in e547f3f804, after
    # these tags): the write-back's entry stays queued, and the next writing_check releases a lock
    # write-back never took.
    r, out = _replay("unified_evict_to_host_not_backed_up.trace.jsonl", tag)
    assert "(_evict_to_host)" not in out, out
    assert r.returncode == 1 and "(release_component_lock)" in out, out


def test_unified_write_back_eviction_is_clean_at_the_newest_snapshot():
    r, out = _replay("unified_evict_to_host_not_backed_up.trace.jsonl", NEWEST)
    assert r.returncode == 0, out


def _hold_after_host_full_inject(tag, storage):
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(tag)
    cache = {"page_size": 4, "device_tokens": 64, "host_tokens": 96, "layer_count": 2, "item_bytes": 16,
             "write_policy": "write_back", "load_back_threshold_tokens": 4}
    if storage:
        cache["storage"] = {"backend": "memory"}
    d = Driver(f"bundle:{tag}", cache_dir=cache_dir())
    try:
        assert d.handle({"call": "hello", "protocol": 1, "scenario": {"cache": cache}, "seed": 1})["ok"]
        host = d.target.host_pool
        assert d.handle({"call": "inject", "target": 0, "n": 0})["ok"]
        return host.size, host.device_pool.size, host.available_size()
    finally:
        d.close()


@pytest.mark.parametrize("storage", [False, True])
def test_a_host_full_inject_holds_what_a_real_holder_could(storage):
    size, device, free = _hold_after_host_full_inject(FIX004, storage)
    if storage:  # an in-flight prefetch may take every free page
        assert free == 0
    else:  # more room than the device pool, as SGLang's host pool has
        assert device < free < size


def test_selective_write_through_mamba_cascade_frees_a_device_slot_twice():
    # Swarm seed 121 (no fault fired): SGLang's tombstone cascade under write_backup's Mamba host
    # allocation frees a device slot a regular eviction already freed; the slot is handed out
    # twice and a node's KV is overwritten (docs/sglang-hunt.md, triage). 491 ops: the shrink
    # stalled. Later tags refuse its op 21, so it is replayed at the fix commit it was found at.
    r, out = _replay("himamba_selective_double_free.trace.jsonl", FIX001)
    assert r.returncode == 1 and "VIOLATION of content" in out and "device KV" in out, out
