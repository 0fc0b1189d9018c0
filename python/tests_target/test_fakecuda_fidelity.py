"""The fake CUDA device (kvsim.fakecuda) held to what a real CUDA device did.

tools/cuda_truth/record_cuda_truth.py runs one table of small torch cases; its JSON from a real GPU
is committed under data/cuda_truth/ (README.md there says where and how it was recorded). Here the
same table runs on the fake device, and every case must agree with the recording: both return (with
the same summary: dtype, device, shape, is_pinned, tiny values, bools) or both raise (the fake's
exception type is the real one or one of its bases, so that `except RuntimeError` behaves the same;
messages are not compared). A case that may differ is in KNOWN_DIFFERENCES with its reason, and must
still differ (a stale entry fails). Without a recording the comparison skips."""

import glob
import importlib.util
import json
import os

import pytest

from test_fakecuda_import import load_fakecuda

_HERE = os.path.dirname(os.path.abspath(__file__))
TRUTH_DIR = os.path.join(_HERE, "data", "cuda_truth")
RECORDER = os.path.join(_HERE, "..", "..", "tools", "cuda_truth", "record_cuda_truth.py")

# case id -> why the fake may disagree with the recording. Keep each reason honest: a torch version
# difference (the fake runs on Debian's torch 1.13, the recording on torch 2.x), or a deliberate
# choice of the fake, or an infidelity not fixed yet (say so).
KNOWN_DIFFERENCES = {
    # torch version: torch.cat([]) involves no device tensor, so it is torch 1.13's own call, which
    # raises RuntimeError; torch 2.11 raises ValueError. An error either way.
    "mix.cat_empty_list": "torch 1.13 raises RuntimeError where torch 2.11 raises ValueError",
    # deliberate: a fake stream *is* its queue, so torch.cuda.current_stream() returns the same
    # object each call; real torch returns a fresh wrapper equal (==) to the last. The fake is laxer
    # only for code that compares streams with `is` (none in SGLang's mem_cache/ and cache_controller.py
    # at 6ed5780c4f).
    "stream.current_stream_identity": "fake streams are singletons; torch wraps each call anew",
}


def _load_recorder():
    spec = importlib.util.spec_from_file_location("record_cuda_truth", os.path.normpath(RECORDER))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _truth_files():
    return sorted(glob.glob(os.path.join(TRUTH_DIR, "*.json")))


@pytest.fixture(scope="module")
def fake_run():
    """(records by case id, the recorder module): the whole table run once on a fresh fake device."""
    fc = load_fakecuda()
    recorder = _load_recorder()
    dev = fc.FakeDevice(seed=0)
    with dev.install():
        records, resume = recorder.run_table()
    assert resume is None
    return {r["case"]: r for r in records}, recorder


def disagreement(real, fake):
    """None when the fake's record agrees with the real one, else what differs."""
    if "ok" in real:
        if "ok" not in fake:
            return f"CUDA returned {real['ok']!r}; the fake raised {fake['raises']}: {fake['message']}"
        if fake["ok"] != real["ok"]:
            return f"CUDA returned {real['ok']!r}; the fake returned {fake['ok']!r}"
        return None
    if "raises" not in fake:
        return f"CUDA raised {real['raises']}: {real['message']}; the fake returned {fake['ok']!r}"
    if fake["raises"] not in real["mro"]:
        return (f"CUDA raised {real['raises']} ({' < '.join(real['mro'])}): {real['message']}; "
                f"the fake raised {fake['raises']}: {fake['message']}")
    return None


def test_table_runs_on_the_fake_and_every_record_is_well_formed(fake_run):
    records, recorder = fake_run
    assert list(records) == [cid for cid, _ in recorder.CASES]
    assert len(records) >= 60
    for cid, rec in records.items():
        assert ("ok" in rec) != ("raises" in rec), cid
        if "raises" in rec:
            assert rec["raises"] == rec["mro"][0] and rec["message"], cid
        json.dumps(rec)
    # the table exercises both outcomes and the fake's device-mixing rule in particular
    assert records["mix.add_cuda_cpu"]["raises"] == "RuntimeError"
    assert records["mix.add_cuda_cpu_0dim"]["ok"]["tensor"]["device"] == "cuda"


def test_disagreement_rule():
    ok = {"ok": {"tensor": {"dtype": "torch.int64", "device": "cuda", "shape": [1], "is_pinned": False,
                            "values": [1]}}}
    other = {"ok": {"tensor": dict(ok["ok"]["tensor"], device="cpu")}}
    rt = {"raises": "RuntimeError", "mro": ["RuntimeError"], "message": "x"}
    acc = {"raises": "AcceleratorError", "mro": ["AcceleratorError", "RuntimeError"], "message": "y"}
    te = {"raises": "TypeError", "mro": ["TypeError"], "message": "z"}
    assert disagreement(ok, ok) is None
    assert "returned" in disagreement(ok, other)
    assert "the fake raised" in disagreement(ok, rt)
    assert "the fake returned" in disagreement(rt, ok)
    assert disagreement(acc, rt) is None  # the fake's RuntimeError is a base of CUDA's error
    assert disagreement(rt, acc) is not None
    assert disagreement(rt, te) is not None


@pytest.mark.parametrize("truth_file", _truth_files() or [None],
                         ids=lambda p: os.path.basename(p) if p else "no-recording")
def test_fake_agrees_with_real_cuda(truth_file, fake_run):
    if truth_file is None:
        pytest.skip(f"no real-CUDA recording in {TRUTH_DIR} (its README.md: how to record one)")
    records, _ = fake_run
    with open(truth_file) as f:
        truth = json.load(f)
    assert truth["mode"] == "real", truth_file
    real = {r["case"]: r for r in truth["records"]}
    stale = sorted(set(real) - set(records))
    assert not stale, f"recorded cases no longer in the table (re-record): {stale}"
    unexpected, still_differ = [], set()
    for cid, rec in real.items():
        why = disagreement(rec, records[cid])
        if why is None:
            continue
        if cid in KNOWN_DIFFERENCES:
            still_differ.add(cid)
        else:
            unexpected.append(f"{cid}: {why}")
    assert not unexpected, "the fake disagrees with real CUDA:\n  " + "\n  ".join(unexpected)
    agreeing_known = sorted(set(KNOWN_DIFFERENCES) & set(real) - still_differ)
    assert not agreeing_known, f"KNOWN_DIFFERENCES entries that now agree (remove them): {agreeing_known}"


# ---- rules the recording implies that the table cannot show (timing on a GPU) ----------------------

@pytest.fixture
def dev():
    d = load_fakecuda().FakeDevice(seed=0)
    with d.install():
        yield d


def test_non_blocking_copy_to_host_on_a_side_stream_is_pinned_and_pending_until_the_stream_runs(dev):
    import torch
    d = torch.arange(3, device="cuda") + 5
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = d.to("cpu", non_blocking=True)
    assert out.is_pinned() and out.device.type == "cpu" and dev.pending(s) == 1
    assert out.tolist() != [5, 6, 7]  # poison: read before a sync, as a GPU would give stale bytes
    s.synchronize()
    assert out.tolist() == [5, 6, 7]
    eager = d.to("cpu", non_blocking=True)  # the default stream runs at once in the fake
    assert eager.is_pinned() and eager.tolist() == [5, 6, 7]
    assert not d.to("cpu").is_pinned()


def test_host_slice_assigned_from_a_device_tensor_waits_for_the_current_stream(dev):
    import torch
    pinned = torch.zeros(3, dtype=torch.int64, pin_memory=True).add_(4)
    d = torch.zeros(3, dtype=torch.int64, device="cuda")
    host = torch.zeros(5, dtype=torch.int64)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d.copy_(pinned, non_blocking=True)
        assert dev.pending(s) == 1
        host[1:4] = d  # a blocking device->host copy: the queued copy runs first
    assert host.tolist() == [0, 4, 4, 4, 0] and dev.pending(s) == 0
    with pytest.raises(RuntimeError, match="same device"):
        host[torch.tensor([0, 1])] = d[:2]  # advanced indexing takes no device values (recorded)
