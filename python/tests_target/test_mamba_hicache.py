"""kvsim.sglang_target.mamba: SGLang's HiMambaRadixCache with HiCache (SGLang's HybridReqToTokenPool,
MambaPool, HybridLinearKVPool, MambaPoolHost and HybridCacheController from
attach_hybrid_pool_to_mamba_cache), io_backend "kernel": insert, write-through of KV and Mamba
state, device eviction, a host hit loaded back (KV bytes checked by the model's read), quiescence.
At seed 001's fix the round trip is clean; at seed 001's parent (tree-owned PoolTransfer mutated
in place) and seed 000's parent (pool-transfer indices not moved to the device) the same calls
end in a violation of a general check (residency / the transfer kernel's index check)."""

import pytest
from sglang_src import driver, fresh_process_state, lifecycle  # noqa: F401 (fixture)

FIX, PARENT_001, PARENT_000 = "sglang-21835fb0af", "sglang-82254bd9c5", "sglang-900aad5f72"
SCENARIO = {"cache": {"page_size": 1, "device_tokens": 64, "host_tokens": 160, "layer_count": 2,
                      "item_bytes": 16, "host_layout": "layer_first", "io_backend": "kernel",
                      "write_policy": "write_through", "load_back_threshold_tokens": 1,
                      "mamba_device_states": 6}}
A = list(range(100, 124))
B = A[:16] + list(range(200, 210))
C = list(range(300, 360))



# A Mamba prefix hit needs a node with Mamba state: d extends A (A's 24 tokens end in one).
CALLS = lifecycle("a", A) + lifecycle("b", B) + lifecycle("c", C) + lifecycle("d", A + [7, 8, 9]) + \
    [{"call": "quiescent"}]


def run(d):
    r = d.handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
    assert r["ok"] and "violation" not in r, r
    replies = []
    for c in CALLS:
        r = d.handle(c)
        assert r["ok"], (c, r)
        replies.append(r)
        if "violation" in r:
            break
    return replies


def test_mamba_hicache_round_trip_is_clean_at_fix():
    d = driver(FIX)
    replies = run(d)
    assert all("violation" not in r for r in replies), [r["violation"] for r in replies if "violation" in r]
    assert len(replies) == len(CALLS)
    admit_d = replies[12]
    assert admit_d["host_hit"] == 24 and admit_d["decisions"]["loaded"] == 24
    assert any(r.get("decisions", {}).get("evicted_device") for r in replies)
    t = d.target
    assert type(t.cache).__name__ == "HiMambaRadixCache"
    assert type(t.mamba_host_pool).__name__ == "MambaPoolHost"
    assert t.controller.io_backend == "kernel"


@pytest.mark.parametrize("tag", [PARENT_001, PARENT_000])
def test_seed_parents_end_in_a_violation(tag):
    d = driver(tag)
    replies = run(d)
    assert "violation" in replies[-1], replies[-1]


def test_checks_catch_planted_faults():
    import torch
    from kvsim.sglang_target import checks, mamba_checks
    d = driver(FIX)
    run(d)
    t = d.target
    nodes = checks.walk(t.cache.root_node)
    assert mamba_checks.check_residency(t, nodes) is None and mamba_checks.check_locks(t, nodes) is None
    node = next(n for n in nodes if n.mamba_host_value is not None)
    node.mamba_host_value = node.mamba_host_value.to("cuda")
    assert mamba_checks.check_residency(t, nodes).invariant == "residency.host_index_on_device"
    node.mamba_host_value = node.mamba_host_value.cpu()
    held = next(n for n in nodes if n is not t.cache.root_node and n.mamba_value is None)
    held.mamba_lock_ref = 1
    assert mamba_checks.check_locks(t, nodes).invariant == "lock.on_evicted"
    held.mamba_lock_ref = 0
    assert torch.is_tensor(node.mamba_host_value)
