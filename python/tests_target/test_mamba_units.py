"""FULL + Mamba under the blind hunt (issue 31): SGLang's Mamba admission in the driver
(mamba_admission.py), the capability report that lets the hunt draw Mamba units, the August
snapshot's build, and the blind finds of seeds 000 and 001 (shrunk traces) plus a drawn Mamba unit
run by kvsim against SGLang's code."""

import copy
import json
import os
import subprocess

import pytest
from sglang_src import driver, fresh_process_state, kvsim_env, lifecycle, sglang_checkout  # noqa: F401
from test_mamba_hicache import CALLS, SCENARIO

FIX, PARENT_001, PARENT_000, FIX_000 = ("sglang-21835fb0af", "sglang-82254bd9c5", "sglang-900aad5f72",
                                        "sglang-efa71ce5ab")
NEWEST = "sglang-6ed5780c4f"
_UNITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mamba_units")


def test_request_rows_as_sglang_sizes_them():
    from kvsim.sglang_target.mamba_admission import request_rows
    assert request_rows(8, 24) == 8
    assert request_rows(8, 19) == 6  # SGLang: max_mamba_cache_size // 3
    assert request_rows(8, 2) == 1  # at least one row
    with pytest.raises(ValueError, match="must be positive"):
        request_rows(8, 0)


def hello(d, scenario):
    r = d.handle({"call": "hello", "protocol": 1, "scenario": scenario, "seed": 1})
    assert r["ok"] and "violation" not in r, r
    return r


def test_a_request_that_does_not_fit_waits():
    """3 Mamba slots give one request row (SGLang's sizing): a second request is not admitted while
    the first runs (no SGLang assert, no driver error) and is admitted once the first finishes."""
    d = driver(FIX)
    scenario = copy.deepcopy(SCENARIO)
    scenario["cache"]["mamba_device_states"] = 3
    hello(d, scenario)
    assert d.target.req_to_token_pool.size == 1
    a, b = list(range(100, 112)), list(range(300, 310))
    assert d.handle({"call": "admit", "rid": "a", "ns": 0, "tokens": a})["admitted"] is True
    r = d.handle({"call": "admit", "rid": "b", "ns": 0, "tokens": b})
    assert r["ok"] and r["admitted"] is False and "violation" not in r, r
    for c in lifecycle("a", a)[1:] + lifecycle("b", b) + [{"call": "quiescent"}]:
        r = d.handle(c)
        assert r["ok"] and "violation" not in r, (c, r)
        if c["call"] == "admit":
            assert r["admitted"] is True, r


def test_a_prefill_step_without_a_mamba_slot_is_deferred():
    """With every Mamba slot taken and none evictable, a prefill step (whose cache_unfinished_req
    forks the request's state) answers computed: false instead of reaching SGLang's assert."""
    d = driver(FIX)
    hello(d, SCENARIO)
    tokens = list(range(100, 112))
    assert d.handle({"call": "admit", "rid": "a", "ns": 0, "tokens": tokens})["admitted"] is True
    pool = d.target.mamba_pool
    held = pool.alloc(pool.available_size())  # what locked write-throughs can hold in a hunt
    r = d.handle({"call": "compute", "rid": "a", "n": len(tokens), "tokens": tokens})
    assert r["ok"] and r["computed"] is False and "violation" not in r, r
    pool.free(held)
    r = d.handle({"call": "compute", "rid": "a", "n": len(tokens), "tokens": tokens})
    assert r["ok"] and r["computed"] is True and "violation" not in r, r


BOTH = ["layer_first", "page_first"]


@pytest.mark.parametrize("tag,layouts", [(PARENT_000, BOTH), (FIX_000, BOTH), (PARENT_001, BOTH), (FIX, BOTH),
                                         (NEWEST, ["page_first"])])
def test_capabilities_offer_mamba_with_the_host_layouts_it_takes(tag, layouts):
    """The hunt draws Mamba units where the revision builds HiMambaRadixCache, with the host layouts
    its MambaPoolHost takes: both in April-May 2026, page-first only at the August snapshot."""
    d = driver(tag)
    plain = {"cache": {k: v for k, v in SCENARIO["cache"].items() if k != "mamba_device_states"}}
    caps = hello(d, plain)["sglang"]["capabilities"]
    assert caps["mamba"] is True and caps["mamba_buildable"] is True, caps
    assert caps["mamba_host_layouts"] == layouts, caps


def test_newest_snapshot_builds_and_runs_the_round_trip():
    """The August snapshot (runtime_context.publish, arg_groups.overrides and the kernels' FLA
    stand-ins) runs the hand-written round trip clean with a page-first host layout, host hit
    loaded back; with layer_first SGLang's own MambaPoolHost refuses."""
    d = driver(NEWEST)
    scenario = copy.deepcopy(SCENARIO)
    scenario["cache"]["host_layout"] = "page_first"
    hello(d, scenario)
    replies = [d.handle(c) for c in CALLS]
    assert all(r["ok"] and "violation" not in r for r in replies), [r for r in replies if "violation" in r]
    assert replies[12]["host_hit"] == 24 and replies[12]["decisions"]["loaded"] == 24
    d.close()
    r = driver(NEWEST).handle({"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 1})
    assert "Unsupported layout: layer_first" in r["violation"]["detail"], r


# ---- kvsim against SGLang's code (needs the built binary) -----------------------------------------
def _kvsim(*args, tag):
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    sglang_checkout(tag)
    env = kvsim_env()
    return subprocess.run([exe, *args, "--sglang-src", f"bundle:{tag}"], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("trace,tag,verdict", [
    ("seed000_kernel_input.trace.jsonl", PARENT_000, "VIOLATION of kernel_input"),
    ("seed000_kernel_input.trace.jsonl", FIX_000, "VIOLATION of residency.host_index_on_device"),  # seed 001
    ("seed000_kernel_input.trace.jsonl", FIX, "clean"),
    ("seed001_residency.trace.jsonl", PARENT_001, "VIOLATION of residency.host_index_on_device"),
    ("seed001_residency.trace.jsonl", FIX, "clean")])
def test_blind_finds_of_seeds_000_and_001(trace, tag, verdict):
    """Each trace is the blind hunt's find (swarm seed 3, a drawn Mamba unit) at the seed's parent,
    shrunk to 3 ops; seed 000's fix still has seed 001's bug; both are fixed at 21835fb0af."""
    r = _kvsim("replay", os.path.join(_UNITS, trace), "--expect-clean", tag=tag)
    assert f"verdict: {verdict}" in r.stdout + r.stderr, r.stdout + r.stderr
    assert r.returncode == (0 if verdict == "clean" else 1), r.stdout + r.stderr


def test_a_drawn_mamba_unit_runs_clean_at_the_fix(tmp_path):
    """The drawn unit (19 Mamba slots, faults on) runs to quiescence clean at seed 001's fix: the
    admission keeps it off SGLang's Mamba asserts; at seed 001's parent it ends in the seed."""
    unit = os.path.join(_UNITS, "swarm_seed3.json")
    r = _kvsim("run", unit, "--seed", "3", "--target", "sglang", tag=FIX)
    assert r.returncode == 0 and "verdict: ok" in r.stdout, r.stdout + r.stderr
    assert "requests finished 0," not in r.stdout
    r = _kvsim("run", unit, "--seed", "3", "--target", "sglang", "--trace-dir", str(tmp_path),
               tag=PARENT_001)  # its failing trace goes to tmp_path, not the caller's folder
    assert r.returncode == 1 and "residency.host_index_on_device" in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_hunt_runs_mamba_units_page_first_at_the_newest_snapshot(tmp_path):
    """Swarm seed 47 draws a Mamba unit with a layer-first host layout (kvsim's draw: LFU,
    write-back, one-token pages, a starved device); at the August snapshot, whose MambaPoolHost
    takes page-first layouts only, the fit keeps Mamba and runs it page-first, and it runs to the
    end clean (725 ops). Seeds 4 and 29 were this unit until the covering array gained the
    prefetch threshold factor (session 26) and the page-mosaic tree shape (session 28), which
    moved every swarm row. (A seed drawing Mamba beside SWA would not do: since the snapshot
    builds FULL + SWA, the fit keeps SWA there.)"""
    empty = tmp_path / "scenarios"
    empty.mkdir()
    r = _kvsim("hunt", "--target", "sglang", "--seed", "47", "--units", "1", "--time-budget", "250", "--json",
               "--no-shrink", "--scenarios", str(empty), "--trace-dir", str(tmp_path), tag=NEWEST)
    hunt = json.loads(r.stdout)["hunt"]
    assert hunt["units"] == 1 and hunt["features"].get("mamba") == 1, hunt
    assert "layer_first" not in hunt["features"], hunt["features"]
    assert r.returncode == 0 and not hunt["failures"], r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("tag", [NEWEST, FIX])
def test_write_back_eviction_with_the_host_held_full_finds_room(tag):
    """Swarm seed 2 (write-back, Mamba, page-first at the August snapshot) once stopped at
    HiMambaRadixCache._evict_device_leaf's `not backuped` assert: the host-full inject held every
    free host page, so a write-back found no room after evict_host. SGLang has no such holder
    without a storage tier, and its host pool is larger than its device pool, so the inject now
    leaves that room (docs/sglang-hunt.md, "Triage of the other failures") and the run is clean."""
    r = _kvsim("replay", os.path.join(_UNITS, "seed2_write_back_host_full.trace.jsonl"), "--expect-clean", tag=tag)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "not backuped" not in out, out
