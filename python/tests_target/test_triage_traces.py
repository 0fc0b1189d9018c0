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
- hiradix_write_back_host_leaf.trace.jsonl (write_back_pressure, seed 14): a real SGLang bug
  (AssertionError 'parent does not have child key' in HiRadixCache.evict_host). Write-back
  eviction demotes a backed-up parent while its child's write-back is still staged on the device,
  so _update_host_leaf_status (which then counted only evicted children) marks the parent a host
  leaf, and nothing clears the mark when the child is demoted; evict_host later takes the parent
  twice. Fixed by 530b497a48 (#23537, 2026-04-30: a child that is backed up keeps its parent off
  the host leaves): fails at every April tag, clean from e264b5785d on.
- himamba_read_waits_mamba_layers.trace.jsonl (hybrid_delayed_completions, seed 46): a harness
  false alarm, a second path to the KeyError above: the read after admission (the batch's
  forward) waited on the FULL layers only, and the request was retracted before its own compute.
  Clean at seed 001's fix."""

import os
import shutil
import subprocess

import pytest
from sglang_src import cache_dir, sglang_checkout

NEWEST, FIX001, FIX004 = "sglang-6ed5780c4f", "sglang-21835fb0af", "sglang-4a04a9818e"
PARENT002, FIX002, PARENT003 = "sglang-c016246b0f", "sglang-e4378ff37f", "sglang-e264b5785d"
EFA = "sglang-efa71ce5ab"
_TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triage_traces")


def _replay(trace, tag, src=None):
    """Replays `trace` at the bundle's `tag`, or at the SGLang tree `src` when given."""
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    sglang_checkout(tag)
    env = dict(os.environ, KVSIM_SGLANG_CACHE=cache_dir(), KVSIM_SGLANG_FORK="0")
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
