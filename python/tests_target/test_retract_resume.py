"""PD decode's retract and resume through SGLang's own code (kvsim.sglang_target.retract): the
device pool's get_cpu_copy / load_cpu_copy (SGLang's NSA pool with its index-with-scale buffer
for sparse scenarios), SGLang's MetadataBuffers for the prefill's metadata. Clean at the newest
snapshot and at seed 003's fix; at seed 003's parent each half of the seed is caught by a check
that holds for any correct cache (the resumed request's sparse index; metadata shared between
live requests)."""

import os
import subprocess

import pytest
from sglang_src import cache_dir, kvsim_env, sglang_checkout, target

NEWEST, SEED003, FIX003 = "sglang-6ed5780c4f", "sglang-e264b5785d", "sglang-ec4560304b"


def pd_scenario(sparse, slots=4, chunk=16):
    cache = {"page_size": 64 if sparse else 4, "device_tokens": 512 if sparse else 128,
             "host_tokens": 1024 if sparse else 256, "layer_count": 2, "item_bytes": 16,
             "hierarchical": not sparse}
    if sparse:
        cache["sparse_index_bytes_per_page"] = 64
    return {"cache": cache, "scheduler": {"mode": "pd", "metadata_slots": slots,
                                          "cpu_copy_chunk_tokens": chunk, "max_running": 4}}


@pytest.fixture(autouse=True)
def fresh_process_state():
    target.unload()
    yield
    target.unload()


def make_driver(tag, scenario):
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(tag)
    d = Driver(f"bundle:{tag}", cache_dir=cache_dir())
    r = d.handle({"call": "hello", "protocol": 1, "scenario": scenario, "seed": 1})
    assert r["ok"], r
    return d, r


def call(d, **c):
    r = d.handle(c)
    assert r is not None and r.get("ok") is not False, (c, r)
    return r


def admit_compute(d, rid, tokens, n=None):
    r = call(d, call="admit", rid=rid, ns=0, tokens=tokens, prefix_cache=False)
    assert r["admitted"], r
    return call(d, call="compute", rid=rid, n=len(tokens) if n is None else n, tokens=tokens)


def retract_resume_cycle(d, long_len):
    """A is offloaded; B takes (and writes) the pages A freed; A resumes on other pages and the
    simulator reads it; both finish."""
    a = list(range(1000, 1000 + long_len))
    b = list(range(5000, 5000 + long_len))
    replies = [admit_compute(d, "A", a)]
    replies.append(call(d, call="offload", rid="A"))
    replies.append(admit_compute(d, "B", b))
    replies.append(call(d, call="resume", rid="A"))
    if "violation" not in replies[-1]:
        replies.append(call(d, call="read", rid="A", n=long_len))
    return replies


def violations(replies):
    return [r["violation"] for r in replies if "violation" in r]


@pytest.mark.parametrize("tag,sparse", [(NEWEST, True), (NEWEST, False), (FIX003, False)])
def test_retract_resume_clean(tag, sparse):
    d, hello = make_driver(tag, pd_scenario(sparse))
    if sparse:
        assert "TokenToKVPool" in hello["sglang"]["kv_pool"]
    replies = retract_resume_cycle(d, 150 if sparse else 30)
    assert replies[3]["resumed"] is True
    assert violations(replies) == []
    for rid, n in (("A", 150 if sparse else 30), ("B", 150 if sparse else 30)):
        assert "violation" not in call(d, call="finish", rid=rid, computed=n)
    call(d, call="flush")
    assert "violation" not in call(d, call="quiescent")
    d.close()


def test_fix003_nsa_offload_raises_through_the_allocator():
    """A real SGLang bug at seed 003's fix (fixed by the newest snapshot): the fix's
    NSATokenToKVPool.get_cpu_copy(indices) drops the base class's mamba_indices parameter, which
    the paged allocator's get_cpu_copy passes, so every NSA decode retract raises TypeError."""
    d, _ = make_driver(FIX003, pd_scenario(True))
    admit_compute(d, "A", list(range(1000, 1150)))
    r = call(d, call="offload", rid="A")
    assert r["violation"]["invariant"] == "sglang.exception", r
    assert "mamba_indices" in r["violation"]["detail"] and "allocator.py" in r["violation"]["detail"]
    d.close()


def test_seed003_index_buffer_caught_at_parent():
    """SGLang's NSA pool before the fix saves only the latent KV: the resumed request's pages
    hold another request's (or no) index bytes."""
    d, _ = make_driver(SEED003, pd_scenario(True, slots=16))
    found = violations(retract_resume_cycle(d, 150))
    assert found and found[0]["invariant"] == "content" and "sparse index" in found[0]["detail"], found
    d.close()


def test_seed003_metadata_views_caught_at_parent():
    """get_buf before the fix returns views of the slot: with one slot, the second live request
    receives its metadata in the memory the first one still reads."""
    d, _ = make_driver(SEED003, pd_scenario(False, slots=1))
    replies = [admit_compute(d, "A", list(range(10, 30)))]
    replies.append(call(d, call="admit", rid="B", ns=0, tokens=list(range(40, 60)), prefix_cache=False))
    found = violations(replies)
    assert found and found[0]["invariant"] in ("metadata.shared", "metadata.isolation"), found
    d.close()


def test_metadata_not_shared_at_fix():
    d, _ = make_driver(FIX003, pd_scenario(False, slots=1))
    replies = [admit_compute(d, "A", list(range(10, 30))), admit_compute(d, "B", list(range(40, 60)))]
    replies.append(call(d, call="offload", rid="A"))
    replies.append(call(d, call="resume", rid="A"))
    assert violations(replies) == []
    d.close()


def test_offload_refused_outside_pd():
    d, _ = make_driver(NEWEST, {"cache": {"page_size": 4, "device_tokens": 64, "host_tokens": 128}})
    call(d, call="admit", rid="A", ns=0, tokens=list(range(8)))
    r = d.handle({"call": "offload", "rid": "A"})
    assert r["ok"] is False and "pd" in r["error"]
    d.close()


def test_sparse_needs_page_64():
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(NEWEST)
    d = Driver(f"bundle:{NEWEST}", cache_dir=cache_dir())
    scenario = pd_scenario(True)
    scenario["cache"]["page_size"] = 4
    r = d.handle({"call": "hello", "protocol": 1, "scenario": scenario, "seed": 1})
    assert r["ok"] is False and "page_size 64" in r["error"]


# ---- shrunk traces of the blind finds, replayed by kvsim (needs the built binary) ----------------
_TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "retract_traces")


def _kvsim():
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    return exe


def _replay(trace, tag):
    sglang_checkout(tag)
    env = kvsim_env()
    return subprocess.run([_kvsim(), "replay", os.path.join(_TRACES, trace), "--sglang-src", f"bundle:{tag}",
                           "--expect-clean"], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("trace,invariant", [("seed003_metadata.trace.jsonl", "metadata.isolation"),
                                             ("seed003_sparse_index.trace.jsonl", "content")])
def test_seed003_traces_fail_at_parent_and_pass_at_newest(trace, invariant):
    """Each trace is a blind find at seed 003's parent (the sparse one from swarm seed 13), shrunk:
    it fails there with its invariant, and SGLang's newest snapshot replays it clean."""
    parent = _replay(trace, SEED003)
    assert parent.returncode == 1 and f"VIOLATION of {invariant}" in parent.stdout + parent.stderr, parent
    newest = _replay(trace, NEWEST)
    assert newest.returncode == 0, newest.stdout + newest.stderr


def test_seed003_metadata_trace_clean_at_fix():
    r = _replay("seed003_metadata.trace.jsonl", FIX003)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metadata_checks_catch_planted_sharing_and_change():
    """retract_checks.check_metadata on hand-made state: two requests holding views of one row
    (values equal, so only the sharing rule sees it); a copy changed under its request; clean
    copies pass."""
    import torch
    from kvsim.sglang_target.metadata import _rid_seed
    from kvsim.sglang_target.retract_checks import check_metadata

    class State:
        received = {}

    rows = torch.zeros((2, 8), dtype=torch.int64)
    rooms = torch.tensor([[_rid_seed("a")], [_rid_seed("b")]], dtype=torch.int64)

    def entry(row_view, room):
        got = (row_view, room)
        return got, tuple(x.clone() for x in got)

    s = State()
    s.received = {"a": entry(rows[0].clone(), rooms[0].clone()), "b": entry(rows[1].clone(), rooms[1].clone())}
    assert check_metadata(s) is None
    s.received = {"a": entry(rows[0], rooms[0].clone()), "b": entry(rows[0], rooms[1].clone())}
    v = check_metadata(s)
    assert v is not None and v.invariant == "metadata.shared"
    s.received = {"a": entry(rows[0], rooms[0].clone())}
    rows[0, 3] = 7  # the slot reused: the request's view changes
    v = check_metadata(s)
    assert v is not None and v.invariant == "metadata.isolation"
    s.received = {"a": entry(rows[1].clone(), rooms[1].clone())}  # b's room under a's name
    v = check_metadata(s)
    assert v is not None and "bootstrap_room" in v.detail
