"""Recording in production: the module writes every call into a kvsim call trace; `kvsim
replay` replays it bit for bit (same event hash, sizes, node count) and `kvsim shrink` shrinks
one that ends in a core assertion."""

import json
import os
import random
import subprocess
import sys
from array import array

import numpy as np
import pytest
from sglang.srt.mem_cache import base_prefix_cache as bpc
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang_fakes import FakeAllocator

import kvsim
from kvsim.sglang import KvsimRadixCache

BUILD = os.environ.get("KVSIM_BUILD_DIR")
KVSIM = os.path.join(BUILD, "tools", "kvsim") if BUILD else None
needs_cli = pytest.mark.skipif(not KVSIM or not os.path.exists(KVSIM), reason="kvsim CLI not built")


def cli(*args):
    return subprocess.run([KVSIM, *args], capture_output=True, text=True)


def footer(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return json.loads(lines[-1])["end"], len(lines) - 2


def scheduler_loop(cache, alloc, rng, steps=400):
    """A scheduler with requests in flight: match + lock, allocate (evicting the shortfall),
    insert, free duplicates, unlock later; a few namespaces, small vocabulary."""
    inflight = []
    for _ in range(steps):
        if inflight and (rng.random() < 0.4 or len(inflight) > 6):
            node, tokens, ns, matched = inflight.pop(rng.randrange(len(inflight)))
            P = cache.page_size
            aligned = len(tokens) // P * P
            need = aligned - len(matched)
            if alloc.available_size() < need:
                cache.evict(bpc.EvictParams(num_tokens=need - alloc.available_size()))
            if alloc.available_size() >= need:
                new = alloc.alloc(need)
                value = np.concatenate([np.asarray(matched, dtype=np.int64), new])
                res = cache.insert(bpc.InsertParams(key=RadixKey(array("q", tokens), ns), value=value))
                if res.prefix_len > len(matched):
                    alloc.free_segment(value[len(matched) : res.prefix_len])
            cache.dec_lock_ref(node)
            continue
        base = rng.choice([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9], [5, 5, 5, 5]])
        tokens = base[: rng.randrange(len(base) + 1)] + [rng.randrange(12) for _ in range(rng.randrange(16))]
        ns = rng.choice([None, "lora-a"])
        m = cache.match_prefix(bpc.MatchPrefixParams(key=RadixKey(array("q", tokens), ns)))
        cache.inc_lock_ref(m.last_device_node)
        inflight.append((m.last_device_node, tokens, ns, np.asarray(m.device_indices).tolist()))
    for node, *_ in inflight:
        cache.dec_lock_ref(node)


@needs_cli
@pytest.mark.parametrize("page_size", [1, 4])
def test_scheduler_loop_records_and_replays_to_the_same_hash(tmp_path, page_size):
    alloc = FakeAllocator(120)
    cache = KvsimRadixCache.create_simulated(mock_allocator=alloc, page_size=page_size, record=str(tmp_path))
    scheduler_loop(cache, alloc, random.Random(page_size))
    path = cache.core.recording_path
    cache.core.close_recording()
    end, calls = footer(path)
    assert end["calls"] == calls > 500 and "violation" not in end
    out = cli("replay", path, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    j = json.loads(out.stdout)
    assert j["matches_recording"] and j["event_hash"] == end["event_hash"] == j["recorded_event_hash"]
    assert (j["nodes"], j["evictable"], j["protected"]) == (end["nodes"], end["evictable"], end["protected"])
    assert j["nodes"] == cache.core.node_count()


@needs_cli
def test_a_tampered_recording_is_reported_as_different(tmp_path):
    t = kvsim.RadixTree(record=str(tmp_path / "t.jsonl"))
    t.insert([1, 2, 3], [1, 2, 3])
    t.match_prefix([1, 2])
    t.close_recording()
    text = (tmp_path / "t.jsonl").read_text().replace('"hit":2', '"hit":3')
    (tmp_path / "t.jsonl").write_text(text)
    out = cli("replay", str(tmp_path / "t.jsonl"))
    assert out.returncode == 3 and "first divergence: call 1 (match)" in out.stdout


@needs_cli
def test_a_violation_is_recorded_flushed_replayed_and_shrunk(tmp_path):
    path = str(tmp_path / "crash.jsonl")
    t = kvsim.RadixTree(page_size=2, record=path)
    rng = random.Random(3)
    for i in range(60):  # noise the shrinker must drop
        toks = [rng.randrange(4) for _ in range(rng.randrange(2, 10))]
        t.insert(toks, list(range(1000 + 10 * i, 1000 + 10 * i + len(toks))))
        t.match_prefix(toks[:3])
    _, node = t.match_prefix([7, 7, 7, 7])
    t.insert([7, 7, 7, 7], [1, 2, 3, 4])
    _, node = t.match_prefix([7, 7, 7, 7])
    lock = t.lock(node)
    t.unlock(lock)
    t.evict(1000)
    with pytest.raises(kvsim.CoreAssertionError):
        t.unlock(lock)  # a stale lock after its node was evicted
    # flushed when the call raised: the footer is on disk while the tree still exists
    end, calls = footer(path)
    assert end["violation"]["call"] == calls - 1 and "vanished" in end["violation"]["detail"]
    out = cli("replay", path)
    assert out.returncode == 1 and "replay matches the recording" in out.stdout
    assert "core.assert" in out.stdout
    small = str(tmp_path / "crash.min.jsonl")
    out = cli("shrink", path, "--out", small)
    assert out.returncode == 0, out.stdout + out.stderr
    end_small, calls_small = footer(small)
    assert calls_small < 10 < calls
    assert "vanished" in end_small["violation"]["detail"]
    assert cli("replay", small).returncode == 1


@needs_cli
def test_kvsim_record_env_and_exit_flush(tmp_path):
    code = (
        "import kvsim\n"
        "t = kvsim.RadixTree(page_size=1)\n"
        "t.insert([1, 2, 3], [4, 5, 6]); t.match_prefix([1, 2]); t.evict(10)\n"
        "print(t.recording_path)\n"  # no close: the atexit hook writes the footer
    )
    env = dict(os.environ, KVSIM_RECORD=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    path = out.stdout.strip()
    assert path.startswith(str(tmp_path))
    end, calls = footer(path)
    assert calls == 3
    assert cli("replay", path).returncode == 0


@needs_cli
def test_recording_is_bounded(tmp_path):
    path = str(tmp_path / "b.jsonl")
    t = kvsim.RadixTree(record=path, record_max_calls=5)
    for i in range(20):
        t.insert([i, i + 1], [i, i + 1])
    assert not t.recording
    end, calls = footer(path)
    assert calls == 5 and end["truncated"]
    out = cli("replay", path)
    assert out.returncode == 0 and "truncated" in out.stdout


def test_bound_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSIM_RECORD_MAX_CALLS", "3")
    t = kvsim.RadixTree(record=str(tmp_path / "e.jsonl"))
    for i in range(5):
        t.insert([i], [i])
    end, calls = footer(str(tmp_path / "e.jsonl"))
    assert calls == 3 and end["truncated"]
    monkeypatch.setenv("KVSIM_RECORD_MAX_CALLS", "lots")
    with pytest.raises(ValueError, match="KVSIM_RECORD_MAX_CALLS"):
        kvsim.RadixTree(record=str(tmp_path / "f.jsonl"))


def test_bad_recording_target_raises():
    with pytest.raises(RuntimeError, match="cannot open recording file"):
        kvsim.RadixTree(record="/nonexistent-dir/x.jsonl")


@needs_cli
def test_bad_call_trace_lines_name_file_line_and_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"kvsim_trace":1,"kind":"calls","page_size":1}\n{"op":"lock","of":5}\n')
    out = cli("replay", str(p))
    assert out.returncode == 2 and "bad.jsonl:2" in out.stderr and "of" in out.stderr


SIGNAL_CHILD = """
import os, signal, sys
import numpy as np
import kvsim
P = int(sys.argv[1])
t = kvsim.RadixTree(page_size=P, record=sys.argv[2])
rng = np.random.default_rng(7)
calls = 0
for i in range(300):
    toks = rng.integers(0, 6, size=int(rng.integers(P, 8 * P))).astype(np.int64)
    idx, node = t.match_prefix(toks); calls += 1
    n = len(toks) // P * P
    t.insert(toks, np.arange(1000 * i, 1000 * i + n, dtype=np.int64)); calls += 1
    if i % 50 == 49:
        t.evict(20); calls += 1
print(calls, flush=True)
if sys.argv[3] == "term":
    os.kill(os.getpid(), signal.SIGTERM)
else:
    os.abort()
"""


@needs_cli
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("how", ["term", "abort"])
def test_recording_survives_sigterm_and_abort(tmp_path, page_size, how):
    """A process killed by SIGTERM or abort() mid-session: the signal handler writes every
    complete call and a footer saying which signal cut the recording (the process never closed
    it, so no tree sizes), and `kvsim replay` replays them, checking each recorded outcome and
    the event hash, and says the recording was cut. The same file without that footer (what
    SIGKILL leaves) is refused, exit 2. With the handler off (KVSIM_RECORD_SIGNALS=0) the same
    run leaves the calls in the buffer, unwritten: a header alone, also refused."""
    path = str(tmp_path / "sig.jsonl")
    sig = -15 if how == "term" else -6
    done = subprocess.run([sys.executable, "-c", SIGNAL_CHILD, str(page_size), path, how],
                          capture_output=True, text=True)
    assert done.returncode == sig, done.stderr
    calls = int(done.stdout.split()[0])
    with open(path) as f:
        lines = f.read().splitlines()
    end = json.loads(lines[-1])["end"]
    assert end["cut_by_signal"] == -sig and end["calls"] == calls
    assert sorted(end) == ["calls", "cut_by_signal", "event_hash"]
    assert len(lines) - 2 == calls  # header + every call, none torn + the footer
    out = cli("replay", path, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    j = json.loads(out.stdout)
    assert j["matches_recording"] and j["applied"] == calls and "divergence" not in j
    assert j["cut_by_signal"] == -sig and j["recorded_event_hash"] == end["event_hash"]
    out = cli("replay", path)
    assert f"the recording was cut by signal {-sig} after {calls} calls" in out.stdout

    cut = str(tmp_path / "cut.jsonl")  # what SIGKILL would have left: no footer
    with open(cut, "w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
    out = cli("replay", cut)
    assert out.returncode == 2 and "incomplete recording: no footer" in out.stderr, out.stderr

    env = dict(os.environ, KVSIM_RECORD_SIGNALS="0")
    off = str(tmp_path / "off.jsonl")
    done = subprocess.run([sys.executable, "-c", SIGNAL_CHILD, str(page_size), off, how], env=env,
                          capture_output=True, text=True)
    assert done.returncode == sig
    with open(off) as f:
        assert len(f.read().splitlines()) == 1  # the header only
    out = cli("replay", off)
    assert out.returncode == 2 and "incomplete recording: no footer after line 1" in out.stderr


@needs_cli
def test_page_hash_recording_replays_and_a_cut_sidecar_is_named(tmp_path):
    """page_size >= 4 records pages as hashes ("pages"), not tokens: the sidecar holds 8 bytes
    per page the tree did not hold, replay maps hashes to synthetic pages and matches; a sidecar
    cut short is reported with the file, line and field."""
    alloc = FakeAllocator(400)
    cache = KvsimRadixCache.create_simulated(mock_allocator=alloc, page_size=8, record=str(tmp_path))
    scheduler_loop(cache, alloc, random.Random(3))
    path = cache.core.recording_path
    cache.core.close_recording()
    with open(path) as f:
        lines = [json.loads(x) for x in f.read().splitlines()]
    assert lines[0]["slots_hash"] == 3
    keyed = [c for c in lines[1:-1] if c.get("op") in ("match", "insert")]
    assert keyed and all("tok" not in c for c in keyed) and any("pages" in c for c in keyed)
    out = cli("replay", path, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["matches_recording"], out.stdout + out.stderr
    last = max((c["pages"][0], i) for i, c in enumerate(lines) if c.get("pages", [0, 0])[1] > 0)
    os.truncate(path + ".bin", last[0])
    out = cli("replay", path)
    assert out.returncode == 2 and f"{os.path.basename(path)}:{last[1] + 1}" in out.stderr
    assert "pages" in out.stderr and "sidecar" in out.stderr
