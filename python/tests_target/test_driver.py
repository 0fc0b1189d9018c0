"""kvsim.sglang_target.driver: SGLang's own HiRadixCache driven call by call through the protocol
(docs/sglang-target-protocol.md), at the newest snapshot and at seed 004's parent, in-process and
as a subprocess; a planted bug is caught by each check; the same calls give the same replies."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from sglang_src import cache_dir, sglang_checkout, target

NEWEST, SEED004 = "sglang-6ed5780c4f", "sglang-27659ea8c8"
TAGS = [NEWEST, SEED004]
SCENARIO = {"cache": {"page_size": 4, "device_tokens": 64, "host_tokens": 128, "layer_count": 2,
                      "item_bytes": 16, "host_layout": "page_first", "write_policy": "write_through",
                      "load_back_threshold_tokens": 4}}
A = list(range(100, 124))  # 24 tokens: 6 pages
B = A[:16] + list(range(200, 210))  # shares 4 pages with A, then diverges: a split
C = list(range(300, 356))  # 56 tokens: fills the device pool, evicting A and B


@pytest.fixture(autouse=True)
def fresh_process_state():
    target.unload()
    yield
    target.unload()


def make_driver(tag, **kw):
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(tag)
    return Driver(f"bundle:{tag}", cache_dir=cache_dir(), **kw)


def hello(d, scenario=SCENARIO):
    r = d.handle({"call": "hello", "protocol": 1, "scenario": scenario, "seed": 1})
    assert r["ok"], r
    return r


def run(d, calls):
    replies = []
    for c in calls:
        r = d.handle(c)
        replies.append(r)
        assert r is None or r.get("ok") is not False, (c, r)
        assert r is None or "violation" not in r, (c, r)
    return replies


def lifecycle(rid, tokens, **admit):
    return [{"call": "admit", "rid": rid, "ns": 0, "tokens": tokens, **admit},
            {"call": "compute", "rid": rid, "n": len(tokens), "tokens": tokens},
            {"call": "finish", "rid": rid, "computed": len(tokens)}]


# Insert, split, write-through and acks; device eviction; a host hit and its load-back (the bytes
# the model reads equal the content function: checked inside the driver); abort while running;
# retract; quiescence.
SEQUENCE = (
    lifecycle("a", A)
    + [{"call": "admit", "rid": "b", "ns": 0, "tokens": B},
       {"call": "compute", "rid": "b", "n": len(B), "tokens": B},
       {"call": "step", "stream": 1, "n": 1},
       {"call": "poll"}, {"call": "flush"},
       {"call": "finish", "rid": "b", "computed": len(B)}]
    + lifecycle("c", C) + [{"call": "flush"}]
    + [{"call": "admit", "rid": "a2", "ns": 0, "tokens": A + [1, 2, 3, 4], "defer_load": True},
       {"call": "start_loads"},
       {"call": "compute", "rid": "a2", "n": 28, "tokens": A + [1, 2, 3, 4]},
       {"call": "read", "rid": "a2", "n": 28},
       {"call": "admit", "rid": "x", "ns": 1, "tokens": A[:12]},
       {"call": "compute", "rid": "x", "n": 8, "tokens": A[:12]},
       {"call": "abort", "rid": "x"},
       {"call": "retract", "rid": "a2", "computed": 28},
       {"call": "tick", "now": 5000},
       {"call": "flush"}, {"call": "quiescent"}]
)


@pytest.mark.parametrize("tag", TAGS)
def test_a_call_sequence_runs_clean_and_sglang_decides_the_hits(tag):
    d = make_driver(tag)
    try:
        r = hello(d)
        assert r["sglang"]["tag"] == tag and r["streams"] == {"compute": 0, "write": 1, "load": 2}
        replies = run(d, SEQUENCE)
        by = {(c["call"], c.get("rid")): r for c, r in zip(SEQUENCE, replies)}
        assert by[("admit", "a")]["device_hit"] == 0
        assert by[("admit", "b")]["device_hit"] == 16  # the match split A's node at 16 tokens
        # C evicted A from the device; A's host copy (write-through) is hit and loaded back.
        assert by[("admit", "a2")]["device_hit"] == 0 and by[("admit", "a2")]["host_hit"] == 24
        assert by[("admit", "a2")]["decisions"]["loaded"] == 24
        assert by[("admit", "x")]["device_hit"] == 0  # namespace 1 shares nothing with 0
        cache = d.target.cache
        assert cache.protected_size_ == 0
        assert d.target.allocator.available_size() + cache.evictable_size() == 64
        assert all(r["state"]["budget"] >= 0 for r in replies)
        queued = [c.get("rid") for c, r in zip(SEQUENCE, replies) if r["state"]["loads_queued"]]
        assert queued == ["a2"]  # only between the deferred admit and start_loads
        assert all(r["computed"] for c, r in zip(SEQUENCE, replies) if c["call"] == "compute")
    finally:
        d.close()


@pytest.mark.parametrize("tag", TAGS)
def test_the_same_calls_give_the_same_replies(tag):
    outs = []
    for _ in range(2):
        d = make_driver(tag)
        try:
            hello(d)
            outs.append(json.dumps(run(d, SEQUENCE), sort_keys=True))
        finally:
            d.close()
        target.unload()
    assert outs[0] == outs[1]


def first_violation(d, calls):
    for c in calls:
        r = d.handle(c)
        assert r.get("ok") is not False, (c, r)
        if "violation" in r:
            return r["violation"]
    return None


def test_missing_record_stream_is_a_stream_lifetime_violation():
    d = make_driver(NEWEST)
    try:
        hello(d)
        d.device.record_stream = lambda t, stream: None  # planted: record_stream does nothing
        v = first_violation(d, lifecycle("a", A) + [{"call": "flush"}])
        assert v is not None and v["invariant"] == "stream_lifetime", v
        assert d.handle({"call": "poll"})["ok"] is False  # after a violation only bye
    finally:
        d.close()


def test_a_host_index_on_the_device_is_a_residency_violation():
    d = make_driver(SEED004)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}])
        node = next(n for n in d.target.cache.root_node.children.values())
        node.host_value = node.host_value.to("cuda")  # planted: seed 001's class of bug
        v = first_violation(d, [{"call": "tick", "now": 1}])
        assert v["invariant"] == "residency" and "host_value" in v["detail"], v
    finally:
        d.close()


def test_a_leaked_lock_fails_quiescence():
    d = make_driver(NEWEST)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}])
        node = next(n for n in d.target.cache.root_node.children.values())
        d.target.cache.inc_lock_ref(node)  # planted: a lock nobody releases
        v = first_violation(d, [{"call": "quiescent"}])
        assert v["invariant"] == "quiescence" and "locked" in v["detail"], v
    finally:
        d.close()


def test_overwritten_device_bytes_are_a_content_violation():
    d = make_driver(NEWEST)
    try:
        hello(d)
        run(d, lifecycle("a", A))
        node = next(n for n in d.target.cache.root_node.children.values())
        buf = d.target.kv_pool.k_buffer[1]
        buf[node.value[:1]] = torch.zeros_like(buf[node.value[:1]])
        v = first_violation(d, [{"call": "tick", "now": 1}])
        assert v["invariant"] == "content" and f"node {node.id} device KV" in v["detail"], v
    finally:
        d.close()


def test_a_corrupted_load_back_is_caught_when_the_model_reads_it():
    d = make_driver(SEED004, content_every=0)  # only the model's read of the prefix checks bytes
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}] + lifecycle("c", C) + [{"call": "flush"}])
        hp = d.target.host_pool
        hp.k_buffer.add_(1)  # planted: every host byte wrong
        v = first_violation(d, [{"call": "admit", "rid": "a2", "ns": 0, "tokens": A + [1], "defer_load": True},
                                {"call": "start_loads"}])
        assert v["invariant"] == "content" and "request a2 reads" in v["detail"], v
    finally:
        d.close()


def test_a_broken_lock_count_is_a_tree_lock_violation():
    d = make_driver(NEWEST)
    try:
        hello(d)
        run(d, lifecycle("a", A))
        node = next(n for n in d.target.cache.root_node.children.values())
        node.lock_ref = -1
        v = first_violation(d, [{"call": "tick", "now": 1}])
        assert v["invariant"] == "tree.lock", v
    finally:
        d.close()


def test_a_read_of_overwritten_bytes_is_a_content_violation():
    d = make_driver(SEED004, content_every=0)
    try:
        hello(d)
        run(d, [{"call": "admit", "rid": "a", "ns": 0, "tokens": A},
                {"call": "compute", "rid": "a", "n": 24, "tokens": A}, {"call": "read", "rid": "a", "n": 24}])
        slot = d.target.req_to_token_pool.req_to_token[d.reqs["a"].req_pool_idx, 5:6].to(torch.int64)
        buf = d.target.kv_pool.v_buffer[0]
        buf[slot] = torch.zeros_like(buf[slot])
        v = first_violation(d, [{"call": "read", "rid": "a", "n": 24}])
        assert v["invariant"] == "content" and "request a reads [0, 24)" in v["detail"], v
    finally:
        d.close()


def test_a_leaked_slot_is_a_conservation_violation():
    d = make_driver(NEWEST)
    try:
        hello(d)
        d.target.allocator.alloc(4)  # planted: four slots nobody owns
        v = first_violation(d, [{"call": "tick", "now": 1}])
        assert v["invariant"] == "slots.conservation", v
    finally:
        d.close()


def test_an_exception_sglang_raises_names_its_frame():
    d = make_driver(NEWEST)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}] + lifecycle("c", C) + [{"call": "flush"}])
        evicted = [n for n in d.target.cache.root_node.children.values() if n.value is None]
        assert evicted
        evicted[0].host_value = None  # planted: an evicted node loses its host copy
        v = first_violation(d, [{"call": "admit", "rid": "a2", "ns": 0, "tokens": A + [1]}])
        assert v["invariant"] == "sglang.exception", v
        assert "TypeError" in v["detail"] and "mem_cache/hiradix_cache.py:" in v["detail"], v
    finally:
        d.close()


def test_bad_input_is_refused_with_a_reason():
    d = make_driver(NEWEST)
    try:
        assert "before 'hello'" in d.handle({"call": "poll"})["error"]
        bad = {"cache": {**SCENARIO["cache"], "host_layout": "sideways"}}
        r = d.handle({"call": "hello", "protocol": 1, "scenario": bad})
        assert r["ok"] is False and "cache.host_layout" in r["error"]
        d2 = make_driver(NEWEST)
        hello(d2)
        assert "unknown request" in d2.handle({"call": "compute", "rid": "zz", "n": 1, "tokens": [1]})["error"]
        assert "unknown call" in d2.handle({"call": "dance"})["error"]
        d2.close()
    finally:
        d.close()


BOOT = ("import sys, runpy; sys.path.insert(0, {tests!r}); import sglang_src; "
        "runpy.run_module('kvsim.sglang_target.driver', run_name='__main__')")


def test_the_driver_as_a_subprocess_speaks_json_lines():
    sglang_checkout(NEWEST)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here), KVSIM_SGLANG_CACHE=cache_dir())
    lines = [{"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1}] + SEQUENCE + [{"call": "bye"}]
    proc = subprocess.run([sys.executable, "-c", BOOT.format(tests=here), "--sglang-src", f"bundle:{NEWEST}"],
                          input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(replies) == len(lines) - 1  # one reply per request; bye has none
    assert all(r["ok"] and "violation" not in r for r in replies), replies
    assert replies[0]["sglang"]["era"] == "2026-08"


def test_calls_per_second_through_the_driver(capsys):
    """Not a timed assertion: prints the rate on a multi-turn sequence (see python/bench)."""
    d = make_driver(NEWEST, content_every=16)
    try:
        hello(d, {"cache": {**SCENARIO["cache"], "device_tokens": 256, "host_tokens": 512}})
        calls = []
        for turn in range(12):
            prompt = list(range(1000, 1000 + 16 * (turn % 4 + 1))) + [turn]
            calls += lifecycle(f"t{turn}", prompt) + [{"call": "poll"}, {"call": "step", "stream": 1, "n": 4}]
        calls += [{"call": "flush"}, {"call": "quiescent"}]
        start = time.perf_counter()
        run(d, calls)
        rate = len(calls) / (time.perf_counter() - start)
        with capsys.disabled():
            print(f"\n[driver] {len(calls)} calls at {rate:.0f} calls/s ({NEWEST}, content walk every 16)")
        assert rate > 0
    finally:
        d.close()
