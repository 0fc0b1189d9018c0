"""kvsim.sglang_target.hybrid: SGLang's UnifiedRadixCache with FULL + SWA components and HiCache
(SGLang's SWAKVPool, SWATokenToKVPoolAllocator and attach_hybrid_pool_to_unified_cache) driven
through the protocol at seed 002's parent and fix (the May 2026 unified_cache_components tree) and
at the newest snapshot (the August 2026 rewrite: unified_cache/ with UnifiedTreeCore and NodeIds):
insert, split, write-through, device eviction, a host hit loaded back with the bytes checked,
quiescence. Each hybrid check catches a planted fault on both trees; a revision without an SWA
stack is refused with a clear error."""

import pytest
import torch
from sglang_src import driver, fresh_process_state, lifecycle, target  # noqa: F401 (fixture)

PARENT, FIX, NEWEST, APRIL = "sglang-c016246b0f", "sglang-e4378ff37f", "sglang-6ed5780c4f", "sglang-82254bd9c5"
SCENARIO = {"cache": {"page_size": 4, "device_tokens": 64, "host_tokens": 128, "layer_count": 2,
                      "item_bytes": 16, "host_layout": "page_first", "write_policy": "write_through",
                      "load_back_threshold_tokens": 4, "swa_window_tokens": 12, "swa_device_tokens": 48}}
A = list(range(100, 124))
B = A[:16] + list(range(200, 210))
C = list(range(300, 340))




def run_clean(d):
    r = d.handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
    assert r["ok"] and "violation" not in r, r
    replies = []
    for c in lifecycle("a", A) + lifecycle("b", B) + lifecycle("c", C) + lifecycle("d", A):
        r = d.handle(c)
        assert r["ok"] and "violation" not in r, (c, r)
        replies.append(r)
    return replies


@pytest.mark.parametrize("tag", [PARENT, FIX, NEWEST])
def test_swa_hicache_round_trip_is_clean(tag):
    d = driver(tag)
    replies = run_clean(d)
    admit_d = replies[12]
    assert admit_d["host_hit"] == 20 and admit_d["decisions"]["loaded"] == 20  # loaded back from host
    assert any(r.get("decisions", {}).get("evicted_device") for r in replies)
    r = d.handle({"call": "quiescent"})
    assert r["ok"] and "violation" not in r, r
    assert d.target.cache.tree_components == (d.target.component_types.FULL, d.target.component_types.SWA)
    d.close()


def _planted(d, plant):
    from kvsim.sglang_target import checks, hybrid_checks
    t = d.target
    nodes = checks.walk(t.cache.root_node)
    plant(t, nodes)
    return (hybrid_checks.check_residency(t, nodes) or hybrid_checks.check_component_locks(t, nodes))


@pytest.mark.parametrize("tag", [FIX, NEWEST])
def test_checks_catch_planted_faults(tag):
    d = driver(tag)
    run_clean(d)
    t = d.target
    FULL, SWA = t.component_types.FULL, t.component_types.SWA

    def host_on_device(t, nodes):
        n = next(n for n in nodes if n.component_data[SWA].host_value is not None)
        n.component_data[SWA].host_value = n.component_data[SWA].host_value.to("cuda")
    v = _planted(d, host_on_device)
    assert v is not None and v.invariant == "residency.host_index_on_device", v
    d.close()
    target.unload()
    d2 = driver(tag)
    run_clean(d2)

    def lock_evicted(t, nodes):
        n = next(n for n in nodes if n.component_data[FULL].value is None)
        n.component_data[FULL].lock_ref += 1
    v = _planted(d2, lock_evicted)
    assert v is not None and v.invariant == "lock.on_evicted", v


@pytest.mark.parametrize("tag", [FIX, NEWEST])
def test_anchor_check_rejects_a_node_past_an_swa_gap(tag):
    from kvsim.sglang_target import checks, hybrid_checks
    d = driver(tag)
    run_clean(d)
    t = d.target
    SWA = t.component_types.SWA
    window = t.opts["swa_window_tokens"]
    # A node below another, shorter than the 12-token window, that every validator accepts (A's
    # tail below the split with B: 8 tokens)
    leaf = next(n for n in checks.walk(t.cache.root_node)
                if n.parent is not t.cache.root_node and len(n.key) < window
                and hybrid_checks.check_anchor(t, n) is None)
    # A gap in SWA (neither device nor host value) shorter than the window below the leaf: the
    # leaf's window cannot be rebuilt, so no load-back may start there.
    chain = []
    n = leaf
    while n is not t.cache.root_node:
        chain.append(n)
        n = n.parent
    gap = chain[1]
    gap.component_data[SWA].value = gap.component_data[SWA].host_value = None
    v = hybrid_checks.check_anchor(t, leaf)
    assert v is not None and v.invariant == "load_back.anchor_not_validated", v


def test_revisions_without_the_swa_stack_are_refused():
    d = driver(APRIL)
    r = d.handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
    assert r["ok"] is False and "swa" in r["error"].lower(), r


@pytest.mark.parametrize("tag,swa", [(PARENT, True), (FIX, True), (APRIL, False), (NEWEST, True)])
def test_hello_reports_what_the_revision_builds(tag, swa):
    """The simulator fits drawn units to these (sim/campaign/target_fit.cpp): SWA units run only
    where the revision builds FULL + SWA."""
    d = driver(tag)
    plain = {"cache": {k: v for k, v in SCENARIO["cache"].items() if not k.startswith("swa_")}}
    r = d.handle({"call": "hello", "protocol": 1, "scenario": plain, "seed": 1})
    assert r["ok"], r
    caps = r["sglang"]["capabilities"]
    assert caps["swa"] is swa, caps  # mamba: test_mamba_capabilities.py
    assert set(caps) == {"swa", "mamba", "mamba_buildable", "mamba_host_layouts", "pd",
                         "sparse_index", "evict_before_alloc"}
    d.close()


def decode_lifecycle(rid, prompt, out):
    """A prompt computed at once, then `out` decode steps of one token each."""
    tokens = prompt + out
    calls = [{"call": "admit", "rid": rid, "ns": 0, "tokens": prompt},
             {"call": "compute", "rid": rid, "n": len(prompt), "tokens": prompt}]
    for i in range(1, len(out) + 1):
        calls.append({"call": "compute", "rid": rid, "n": len(prompt) + i, "tokens": tokens[: len(prompt) + i]})
    return calls + [{"call": "finish", "rid": rid, "computed": len(tokens)}, {"call": "flush"}]


@pytest.mark.parametrize("tag", [FIX, NEWEST])
def test_decode_frees_out_of_window_swa_slots_and_tombstones_them_in_the_tree(tag):
    """The scheduler's release of SWA slots behind the window (swa_evicted_seqlen) during decode
    (at the newest snapshot SGLang's own common.free_swa_out_of_window_slots): the SWA allocator
    gets them back mid-request, the finished request's insert leaves that part of the tree
    without SWA (a tombstone, FULL kept), and every SWA and FULL byte left checks."""
    d = driver(tag)
    r = d.handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
    assert r["ok"], r
    t = d.target
    prompt, out = list(range(500, 508)), list(range(600, 624))  # 8 + 24 tokens, window 12
    swa_free = []
    for c in decode_lifecycle("a", prompt, out):
        r = d.handle(c)
        assert r["ok"] and "violation" not in r, (c, r)
        if c["call"] == "compute":
            swa_free.append(int(t.allocator.swa_available_size()) - int(t.allocator.full_available_size()))
    # Decode allocates a FULL and an SWA slot per token; past the window, SWA pages go back while
    # the FULL ones stay the request's.
    assert swa_free[-1] > swa_free[0], swa_free
    SWA, FULL = t.component_types.SWA, t.component_types.FULL
    nodes = [n for n in __import__("kvsim.sglang_target.checks", fromlist=["walk"]).walk(t.cache.root_node)
             if n is not t.cache.root_node]
    tomb = [n for n in nodes if n.component_data[SWA].value is None and n.component_data[FULL].value is not None]
    assert tomb, "the out-of-window part is an SWA tombstone"
    assert any(n.component_data[SWA].value is not None for n in nodes)
    r = d.handle({"call": "quiescent"})
    assert r["ok"] and "violation" not in r, r
    d.close()


@pytest.mark.parametrize("tag", [FIX, NEWEST])
def test_size_and_swa_content_checks_catch_planted_faults(tag):
    from kvsim.sglang_target import checks, hybrid_checks
    d = driver(tag)
    run_clean(d)
    t = d.target
    SWA = t.component_types.SWA
    nodes = checks.walk(t.cache.root_node)
    assert hybrid_checks.check_sizes(t, nodes) is None and hybrid_checks.check_content(t, nodes) is None
    evictable = t.tree.sizes()[0]  # the cache's (May) or its tree core's (August)
    evictable[SWA] += t.cfg.page_size
    v = hybrid_checks.check_sizes(t, nodes)
    assert v is not None and v.invariant == "sizes.component", v
    evictable[SWA] -= t.cfg.page_size
    n = next(n for n in nodes if n is not t.cache.root_node and n.component_data[SWA].value is not None)
    slot = n.component_data[SWA].value[:1].to(torch.int64).to("cuda")
    t.swa_kv_pool.k_buffer[0][slot] += 1
    v = hybrid_checks.check_content(t, nodes)
    assert v is not None and v.invariant == "content" and "device SWA" in v.detail, v
    t.swa_kv_pool.k_buffer[0][slot] -= 1
    assert hybrid_checks.check_content(t, nodes) is None
    n = next(n for n in nodes if n is not t.cache.root_node and n.component_data[SWA].host_value is not None)
    swa_host = t.cache.components[SWA]._swa_kv_pool_host
    swa_host.v_buffer[n.component_data[SWA].host_value[-1].item()] += 1  # page_first: [token, layer, ...]
    v = hybrid_checks.check_content(t, nodes)
    assert v is not None and v.invariant == "content" and "host SWA" in v.detail, v
    d.close()


def _gap_then_reuse(tag):
    """A decodes past the window (an SWA tombstone at [8, 12), its tail's SWA on device, not
    backed up); C's SWA demand (SWA pool 32 < FULL 64) tombstones A's first node on device,
    which keeps a host copy; F reuses all of A. Its deepest node all validators accept is A's
    tail, and the deepest backed-up node above it is A's first node, whose SWA is host-only."""
    d = driver(tag)
    sc = {"cache": dict(SCENARIO["cache"], swa_device_tokens=32)}
    r = d.handle({"call": "hello", "protocol": 1, "scenario": sc, "seed": 1})
    assert r["ok"], r
    A, out = list(range(500, 508)), list(range(600, 624))
    calls = decode_lifecycle("a", A, out) + lifecycle("c", list(range(300, 308))) + \
        lifecycle("f", A + out + [901, 902, 903, 904]) + [{"call": "quiescent"}]
    for c in calls:
        r = d.handle(c)
        assert r["ok"], (c, r)
        if "violation" in r:
            return d, c, r["violation"]
    return d, None, None


@pytest.mark.parametrize("tag", [FIX, NEWEST])
def test_reuse_below_an_swa_gap_keeps_the_prefix_locked_at_seed_002s_fix(tag):
    d, call, v = _gap_then_reuse(tag)
    assert v is None, (call, v)
    d.close()


def test_reuse_below_an_swa_gap_is_caught_at_seed_002s_parent():
    """The parent anchors the load-back on last_host_node (A's first node) and hands it back as
    the request's node to lock, so 24 reused tokens go unprotected (lock.prefix_uncovered)."""
    d, call, v = _gap_then_reuse(PARENT)
    assert v is not None and v["invariant"] == "lock.prefix_uncovered", (call, v)
    assert call["call"] == "admit" and call["rid"] == "f"
    d.close()


def test_prefill_releases_swa_behind_the_window_at_the_newest_snapshot():
    """At the August tree, cache_unfinished_req frees a prefill's SWA slots behind the window
    (SGLang's default SGLANG_OPT_UNIFIED_CACHE_FREE_OUT_OF_WINDOW_SLOTS, unified_tree.py): a
    24-token prompt computed at once (window 12, page 4) gives back the SWA slots of its first 8
    tokens before it finishes, its insert leaves them an SWA tombstone (FULL kept), and the run
    ends clean; at seed 002's fix (the May tree) the prefill keeps every SWA slot."""
    from kvsim.sglang_target import checks
    freed = {}
    for tag in (FIX, NEWEST):
        target.unload()
        d = driver(tag)
        r = d.handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
        assert r["ok"], r
        t = d.target
        prompt = list(range(700, 724))
        for c in [{"call": "admit", "rid": "p", "ns": 0, "tokens": prompt},
                  {"call": "compute", "rid": "p", "n": len(prompt), "tokens": prompt}]:
            r = d.handle(c)
            assert r["ok"] and "violation" not in r, (c, r)
        freed[tag] = int(t.allocator.swa_available_size()) - int(t.allocator.full_available_size())
        SWA, FULL = t.component_types.SWA, t.component_types.FULL
        nodes = [n for n in checks.walk(t.cache.root_node) if n is not t.cache.root_node]
        tomb = sum(len(n.key) for n in nodes
                   if n.component_data[SWA].value is None and n.component_data[FULL].value is not None)
        for c in [{"call": "finish", "rid": "p", "computed": len(prompt)}, {"call": "flush"},
                  {"call": "quiescent"}]:
            r = d.handle(c)
            assert r["ok"] and "violation" not in r, (c, r)
        d.close()
        if tag == NEWEST:
            assert tomb == 8, tomb
    swa_spare = SCENARIO["cache"]["swa_device_tokens"] - SCENARIO["cache"]["device_tokens"]  # -16
    assert freed[FIX] == swa_spare and freed[NEWEST] == swa_spare + 8, freed


def _short_tail_run(tag, window):
    """Two requests sharing a 17-token prompt (page 5), both admitted before either computes:
    a's prefill inserts 15 tokens, b's overlaps all 15. Returns (call, violation) or None."""
    target.unload()
    d = driver(tag)
    sc = {"cache": {"page_size": 5, "device_tokens": 105, "host_tokens": 210, "layer_count": 2,
                    "item_bytes": 8, "host_layout": "page_first", "write_policy": "write_through",
                    "load_back_threshold_tokens": 5, "swa_window_tokens": window}}
    r = d.handle({"call": "hello", "protocol": 1, "scenario": sc, "seed": 1})
    assert r["ok"], r
    a = list(range(1000, 1017))
    b = a + [2000, 2001]
    for c in [{"call": "admit", "rid": "a", "ns": 0, "tokens": a}, {"call": "admit", "rid": "b", "ns": 0, "tokens": b},
              {"call": "compute", "rid": "a", "n": len(a), "tokens": a},
              {"call": "compute", "rid": "b", "n": len(b), "tokens": b},
              {"call": "finish", "rid": "a", "computed": len(a)}, {"call": "finish", "rid": "b", "computed": len(b)},
              {"call": "flush"}, {"call": "quiescent"}]:
        r = d.handle(c)
        assert r["ok"], (c, r)
        if "violation" in r:
            d.close()
            return c, r["violation"]
    d.close()
    return None


def test_an_swa_tail_shorter_than_the_window_fails_in_sglang_at_the_newest_snapshot():
    """A real SGLang bug at the newest snapshot (docs/sglang-hunt.md, "Hybrid models: FULL + SWA";
    swarm seeds 11 and 37): with out-of-window slots freed at cache_unfinished_req (SGLang's
    default), common.free_swa_out_of_window_slots keeps max(window, page) tokens before pre_len
    and page-floors the frontier, so a prompt that is not page-aligned (17 tokens, page 5, window
    6: frontier 10, insert boundary 15) leaves 5 live SWA tokens in the leaf, less than a window;
    the re-match refuses it and b's overlapping insert trips SGLang's own assert. A window of two
    pages (10) keeps a full window and runs clean; seed 002's fix (the May tree) frees nothing
    there and runs clean."""
    call, v = _short_tail_run(NEWEST, 6)
    assert call["call"] == "compute" and call["rid"] == "b", call
    assert v["invariant"] == "sglang.exception" and "new_prefix_len=15, len(new_indices)=0" in v["detail"], v
    assert _short_tail_run(NEWEST, 10) is None
    assert _short_tail_run(FIX, 6) is None


@pytest.mark.parametrize("trace,invariant", [("swarm_seed37_swa_tail_assert.trace.jsonl", "sglang.exception"),
                                             ("swarm_seed11_swa_tail_content.trace.jsonl", "content")])
def test_the_shrunk_swa_tail_traces_replay_at_the_newest_snapshot(trace, invariant):
    """The blind hunt's two SWA failures at the newest snapshot, shrunk (6 and 20 ops): the same
    bug's assert, and (seed 11: a chunked prefill whose first chunk's leaf is short) the next
    chunk's insert freeing FULL KV the tree still holds, which a later request overwrites."""
    import os
    import subprocess
    from sglang_src import kvsim_env, sglang_checkout
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    sglang_checkout(NEWEST)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hybrid_units", trace)
    env = kvsim_env()
    r = subprocess.run([exe, "replay", path, "--sglang-src", f"bundle:{NEWEST}"], capture_output=True, text=True,
                       env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and f"replay matches the recording (violation {invariant})" in out, out
