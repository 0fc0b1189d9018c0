"""The SGLang target under each policy and host layout SGLang supports (LFU eviction, write-back,
selective write-through; layer_first, page_first, page_first_direct, page_head) at the newest
snapshot and an April 2026 tag, evict_host reached directly, and the delayed-event injection
(target 2) that delays without breaking what a real GPU guarantees."""

import pytest
from sglang_src import cache_dir, sglang_checkout, target

NEWEST, APRIL = "sglang-6ed5780c4f", "sglang-4a04a9818e"
A = list(range(100, 124))
B = A[:16] + list(range(200, 210))
C = list(range(300, 356))


def cache(**kw):
    return {"cache": {"page_size": 4, "device_tokens": 64, "host_tokens": 128, "layer_count": 2,
                      "item_bytes": 16, "host_layout": "page_first", "write_policy": "write_through",
                      "load_back_threshold_tokens": 4, **kw}}


@pytest.fixture(autouse=True)
def fresh_process_state():
    target.unload()
    yield
    target.unload()


def driver(tag, sc):
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(tag)
    d = Driver(f"bundle:{tag}", cache_dir=cache_dir())
    return d, d.handle({"call": "hello", "protocol": 1, "scenario": sc, "seed": 1})


def life(rid, tokens):
    return [{"call": "admit", "rid": rid, "ns": 0, "tokens": tokens},
            {"call": "compute", "rid": rid, "n": len(tokens), "tokens": tokens},
            {"call": "finish", "rid": rid, "computed": len(tokens)}]


# Two hits on A's prefix (selective write-through backs up on the second), a split, eviction by
# C, a load-back of A, quiescence.
SHORT = (life("a", A) + life("a1", A[:20] + [7]) + life("b", B) + [{"call": "flush"}]
         + life("c", C) + [{"call": "flush"}] + life("a2", A + [1, 2]) + [{"call": "flush"}, {"call": "quiescent"}])


def run(d, calls):
    out = []
    for c in calls:
        r = d.handle(c)
        assert r["ok"] and "violation" not in r, (c, r)
        out.append((c, r))
    return out


@pytest.mark.parametrize("tag", [NEWEST, APRIL])
@pytest.mark.parametrize("layout", ["layer_first", "page_first", "page_first_direct", "page_head"])
def test_each_host_layout_runs_clean(tag, layout):
    d, hello = driver(tag, cache(host_layout=layout))
    try:
        assert hello["ok"], hello
        assert d.target.host_pool.layout == layout
        out = run(d, SHORT)
        a2 = next(r for c, r in out if c["call"] == "admit" and c["rid"] == "a2")
        assert a2["host_hit"] > 0 and a2["decisions"]["loaded"] == a2["host_hit"]  # bytes checked by reads
    finally:
        d.close()


@pytest.mark.parametrize("tag", [NEWEST, APRIL])
@pytest.mark.parametrize("policy", ["write_back", "write_through_selective"])
def test_write_policies(tag, policy):
    d, hello = driver(tag, cache(write_policy=policy))
    try:
        assert hello["ok"], hello
        out = run(d, SHORT)
        first_flush = next(r for c, r in out if c["call"] == "flush")
        compute_c = next(r for c, r in out if c["call"] == "compute" and c["rid"] == "c")
        if policy == "write_back":
            # Nothing is written before eviction; C's eviction writes A and B back first.
            assert "write_acks" not in first_flush.get("decisions", {})
            assert compute_c["decisions"]["evicted_device"] > 0
        else:
            # Only the prefix hit twice (A's first 16 tokens, hit by a1 and b) was backed up.
            assert first_flush["decisions"]["write_acks"] >= 1
        assert d.target.controller.write_policy == policy
    finally:
        d.close()


@pytest.mark.parametrize("tag", [NEWEST, APRIL])
def test_lfu_evicts_the_least_hit_prefix_first(tag):
    d, hello = driver(tag, cache(eviction_policy="lfu", device_tokens=64))
    try:
        assert hello["ok"], hello
        X = list(range(500, 524))
        # A is hit three times, X once (X is the most recent): LFU evicts X, LRU would evict A.
        run(d, life("a", A) + life("a1", A + [1]) + life("a3", A + [2]) + life("x", X) + [{"call": "flush"}])
        out = run(d, [{"call": "evict", "n": 24}])
        assert out[0][1]["decisions"]["evicted_device"] >= 24
        probe = run(d, life("p", A + [9]))
        assert probe[0][1]["device_hit"] == 24  # A stayed on the device
    finally:
        d.close()


@pytest.mark.parametrize("tag", [NEWEST, APRIL])
def test_evict_host_frees_only_device_evicted_nodes(tag):
    d, hello = driver(tag, cache())
    try:
        out = run(d, life("a", A) + [{"call": "flush"}] + life("c", C) + [{"call": "flush"},
                                                                          {"call": "evict_host", "n": 8}])
        assert out[-1][1]["decisions"]["evicted_host"] == 24  # A's whole node (C is on the device)
        assert d.target.host_pool.available_size() == 128 - 56
        again = run(d, [{"call": "evict_host", "n": 100}])
        assert "decisions" not in again[0][1] or "evicted_host" not in again[0][1]["decisions"]
        assert "evict_host: n=-1" in d.handle({"call": "evict_host", "n": -1})["error"]
    finally:
        d.close()


def load_back_rounds(n):
    calls = life("a", A) + [{"call": "flush"}] + life("c", C) + [{"call": "flush"}]
    for i in range(n):
        calls += [{"call": "inject", "target": 2}] + life(f"r{i}", A + [i]) \
            + [{"call": "step", "stream": 2, "n": 99}, {"call": "flush"}] + life(f"c{i}", C + [i]) + [{"call": "flush"}]
    return calls


def test_delayed_events_only_delay():
    """Four load-backs reuse a LayerDoneCounter slot (update_producer asserts its finish event is
    done); with target 2 injected before each, the steps make no progress but nothing trips."""
    d, _ = driver(NEWEST, cache())
    try:
        out = run(d, load_back_rounds(4))
        assert [r["ran"] for c, r in out if c["call"] == "step"] == [0, 0, 0, 0]
        loads = [r["decisions"]["loaded"] for c, r in out if c["call"] == "admit" and c["rid"].startswith("r")]
        assert loads == [24, 24, 24, 24]
    finally:
        d.close()


def test_a_query_that_lies_trips_sglang_where_hardware_never_would():
    """The planted contrast: event queries answering False for finished work (what target 2 did
    before) make SGLang's update_producer assertion fail on the fourth load-back."""
    d, _ = driver(NEWEST, cache())
    try:
        v, lie = None, False
        for c in load_back_rounds(4):
            if lie:
                d.device.Event.query = lambda self_: False  # planted: the old target-2 semantics
            r = d.handle(c)
            if lie:
                del d.device.Event.query
            lie = c["call"] == "inject"
            if "violation" in r:
                v = r["violation"]
                break
        assert v is not None and v["invariant"] == "sglang.exception" and "Producer finish event" in v["detail"], v
    finally:
        d.close()
