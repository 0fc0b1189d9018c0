"""Rolling recording window (record_window=N / KVSIM_RECORD_WINDOW): the module writes a new
segment file every N calls, each starting with a snapshot of the tree, and keeps only the last
two; `kvsim replay` restores a segment's snapshot and replays its calls bit for bit (same
outcomes, event hash, sizes), and `kvsim shrink` shrinks a segment that ends in a core
assertion, keeping the snapshot whole."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from sglang_fakes import FakeAllocator
from test_recording import cli, needs_cli, scheduler_loop

import kvsim
from kvsim.sglang import KvsimRadixCache


def lines_of(path):
    with open(path) as f:
        return [json.loads(x) for x in f.read().splitlines()]


def replay_json(path):
    out = cli("replay", path, "--json")
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def assert_replays_to_its_footer(path):
    """`kvsim replay` of a closed segment: exit 0, every outcome as recorded, the footer's event
    hash, node count and sizes."""
    lines = lines_of(path)
    end = lines[-1]["end"]
    out, j = replay_json(path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert j["matches_recording"] and "divergence" not in j
    assert j["applied"] == end["calls"] == sum(1 for c in lines if "op" in c)
    assert j["snapshot"]["nodes"] == lines[1]["snapshot"]["nodes"]
    assert j["event_hash"] == end["event_hash"] == j["recorded_event_hash"]
    assert (j["nodes"], j["evictable"], j["protected"]) == (end["nodes"], end["evictable"], end["protected"])
    return end, j


@needs_cli
@pytest.mark.parametrize("page_size", [1, 8])
def test_a_long_session_keeps_the_last_two_segments_and_each_replays(tmp_path, page_size):
    alloc = FakeAllocator(160)
    cache = KvsimRadixCache.create_simulated(
        mock_allocator=alloc, page_size=page_size, record=str(tmp_path), record_window=100
    )
    scheduler_loop(cache, alloc, random.Random(10 + page_size), steps=700)
    segments = cache.core.recording_segments
    assert len(segments) == 2 and segments[-1] == cache.core.recording_path
    cache.core.close_recording()
    # Only the last two segments (and their sidecars) are left on disk.
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(p) for p in segments] + [os.path.basename(p) + ".bin" for p in segments]
    )
    older, newer = segments
    first_calls = []
    earlier_forms = 0
    for path in segments:
        lines = lines_of(path)
        snap = lines[1]["snapshot"]
        assert snap["nodes"] > 0 and lines[2]["node"] >= 1
        first_calls.append(snap["first_call"])
        earlier_forms += sum(1 for c in lines if c.get("op") == "unlock" and "lock" in c)
        earlier_forms += sum(1 for c in lines if c.get("op") == "lock" and "node" in c)
        end, j = assert_replays_to_its_footer(path)
        assert j["snapshot"]["first_call"] == snap["first_call"] > 0
    assert first_calls[1] == first_calls[0] + 100  # the older segment is a full window
    assert lines_of(older)[-1]["end"]["calls"] == 100
    assert 0 < lines_of(newer)[-1]["end"]["calls"] <= 100
    assert earlier_forms > 0  # locks taken in one segment were released in the next
    assert lines_of(newer)[-1]["end"]["nodes"] == cache.core.node_count()


@needs_cli
def test_locks_and_nodes_from_before_a_segment_are_named_by_id_and_record(tmp_path):
    """A lock of a node returned in the previous segment names the node by id; the unlock of a
    lock taken in the previous segment carries the lock's record."""
    path = str(tmp_path / "w.jsonl")
    t = kvsim.RadixTree(page_size=1, record=path, record_window=2)
    t.insert([1, 2, 3, 4], [10, 11, 12, 13])
    _, node = t.match_prefix([1, 2, 3])  # splits: node is new; the window rotates here
    lock = t.lock(node)  # segment 1: the node is named by id
    t.insert([1, 2, 7], [20, 21, 22])  # rotates
    t.unlock(lock)  # segment 2: the lock is named by its record
    segs = t.recording_segments
    t.close_recording()
    assert [os.path.basename(p) for p in segs] == ["w.seg000001.jsonl", "w.seg000002.jsonl"]
    seg1, seg2 = (lines_of(p) for p in segs)
    assert {"op": "lock", "node": node} in seg1
    unlock = next(c for c in seg2 if c.get("op") == "unlock")
    assert unlock["lock"]["call"] == 2 and unlock["lock"]["start"] == node
    assert seg2[1]["snapshot"]["locks"] == [{"call": 2, "anchor": node, "start": node}]
    for p in segs:
        assert_replays_to_its_footer(p)


@needs_cli
def test_a_violation_leaves_a_last_segment_that_replays_and_shrinks(tmp_path):
    path = str(tmp_path / "crash.jsonl")
    t = kvsim.RadixTree(page_size=2, record=path, record_window=50)
    rng = random.Random(3)
    t.insert([7, 7, 7, 7], [1, 2, 3, 4])
    _, node = t.match_prefix([7, 7, 7, 7])
    lock = t.lock(node)
    t.unlock(lock)
    t.evict(1000)
    for i in range(130):  # noise the shrinker must drop, over several segments
        toks = [rng.randrange(4) for _ in range(rng.randrange(2, 10))]
        t.insert(toks, list(range(1000 + 10 * i, 1000 + 10 * i + len(toks))))
        t.match_prefix(toks[:3])
    with pytest.raises(kvsim.CoreAssertionError):
        t.unlock(lock)  # a stale lock, taken five segments ago, after its node was evicted
    last = t.recording_segments[-1]
    assert last.endswith(".seg000005.jsonl")
    # flushed when the call raised: the footer is on disk while the tree still exists
    end = lines_of(last)[-1]["end"]
    assert end["violation"]["call"] == end["calls"] - 1 and "vanished" in end["violation"]["detail"]
    out = cli("replay", last)
    assert out.returncode == 1 and "replay matches the recording" in out.stdout, out.stdout + out.stderr
    assert "core.assert" in out.stdout and "segment 5 of a windowed recording" in out.stdout
    small = str(tmp_path / "crash.min.jsonl")
    out = cli("shrink", last, "--out", small)
    assert out.returncode == 0, out.stdout + out.stderr
    shrunk = lines_of(small)
    assert shrunk[1]["snapshot"] == {**lines_of(last)[1]["snapshot"]}  # the snapshot is kept whole
    calls = [c for c in shrunk if "op" in c]
    assert len(calls) == 1 and calls[0]["op"] == "unlock" and "lock" in calls[0]
    assert "vanished" in shrunk[-1]["end"]["violation"]["detail"]
    out = cli("replay", small)
    assert out.returncode == 1 and "replay matches the recording" in out.stdout


@needs_cli
def test_a_lock_released_twice_is_recorded_and_replayed(tmp_path):
    """Two locks on one node and one of them released twice: the core notices nothing until the
    other lock's release; the snapshot in between says its lock counts and held locks disagree
    (replay then restores the counts as they were), and the crash replays."""
    path = str(tmp_path / "twice.jsonl")
    t = kvsim.RadixTree(page_size=1, record=path, record_window=4)
    t.insert([5, 6], [1, 2])
    _, node = t.match_prefix([5, 6])
    a, b = t.lock(node), t.lock(node)
    t.unlock(a)
    t.unlock(a)  # no error: b still held the count up
    for i in range(6):
        t.insert([9, i], [100 + 2 * i, 101 + 2 * i])
    with pytest.raises(kvsim.CoreAssertionError):
        t.unlock(b)
    last = t.recording_segments[-1]
    snap = lines_of(last)[1]["snapshot"]
    assert "held locks cover it 1 time" in snap["locks_disagree"]
    out = cli("replay", last)
    assert out.returncode == 1 and "replay matches the recording" in out.stdout, out.stdout + out.stderr
    assert "lock counts and the locks held disagreed" in out.stdout


@needs_cli
def test_window_from_the_environment_and_bad_values(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSIM_RECORD_WINDOW", "3")
    t = kvsim.RadixTree(record=str(tmp_path))
    for i in range(10):
        t.insert([i, i + 1], [2 * i, 2 * i + 1])
    segs = t.recording_segments
    assert [os.path.basename(p).split(".")[1] for p in segs] == ["seg000002", "seg000003"]
    t.close_recording()
    assert [lines_of(p)[-1]["end"]["calls"] for p in segs] == [3, 1]
    for p in segs:
        assert_replays_to_its_footer(p)
    monkeypatch.setenv("KVSIM_RECORD_WINDOW", "many")
    with pytest.raises(ValueError, match="KVSIM_RECORD_WINDOW: not a number"):
        kvsim.RadixTree(record=str(tmp_path))
    monkeypatch.delenv("KVSIM_RECORD_WINDOW")
    monkeypatch.setenv("KVSIM_RECORD_WINDOW_SECONDS", "soon")
    with pytest.raises(ValueError, match="KVSIM_RECORD_WINDOW_SECONDS: not a number of seconds"):
        kvsim.RadixTree(record=str(tmp_path))
    monkeypatch.delenv("KVSIM_RECORD_WINDOW_SECONDS")
    with pytest.raises(ValueError, match="record_max_calls .* record_window"):
        kvsim.RadixTree(record=str(tmp_path), record_window=5, record_max_calls=5)


@needs_cli
def test_window_in_seconds(tmp_path):
    t = kvsim.RadixTree(record=str(tmp_path / "s.jsonl"), record_window_seconds=0.3)
    for step in range(3):
        t.insert([1, step + 2], [2 * step, 2 * step + 1])
        before = t.recording_path
        time.sleep(0.35)
        t.match_prefix([1, step + 2])  # the segment is older than 0.3 s: the next one starts
        assert t.recording_path != before
    segs = t.recording_segments
    t.close_recording()
    assert len(segs) == 2
    assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".jsonl")) == [
        os.path.basename(p) for p in segs
    ]
    for p in segs:
        assert_replays_to_its_footer(p)


SIGNAL_CHILD = """
import os, signal, sys
import numpy as np
import kvsim
t = kvsim.RadixTree(page_size=4, record=sys.argv[1], record_window=40)
rng = np.random.default_rng(5)
locks = []
for i in range(250):
    toks = rng.integers(0, 4, size=int(rng.integers(4, 24))).astype(np.int64)
    idx, node = t.match_prefix(toks)
    if i % 3 == 0:
        locks.append(t.lock(node))
    if len(locks) > 4:
        t.unlock(locks.pop(0))
    n = len(toks) // 4 * 4
    t.insert(toks, np.arange(1000 * i, 1000 * i + n, dtype=np.int64))
    if i % 25 == 24:
        t.evict(30)
print(t.recording_segments[-1], flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""


@needs_cli
def test_a_window_survives_sigterm(tmp_path):
    """SIGTERM mid-segment: the handler writes the current segment's complete calls and a footer
    naming the signal; it replays from its snapshot, checking every recorded outcome."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_CHILD, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == -signal.SIGTERM, done.stderr
    last = done.stdout.split()[0]
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".jsonl")]) == 2
    lines = lines_of(last)
    assert "snapshot" in lines[1] and lines[-1]["end"]["cut_by_signal"] == signal.SIGTERM
    out, j = replay_json(last)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = sum(1 for c in lines if "op" in c)
    assert j["matches_recording"] and j["applied"] == calls > 0 and "divergence" not in j
    assert j["cut_by_signal"] == signal.SIGTERM
