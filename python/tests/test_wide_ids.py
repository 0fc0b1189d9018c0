"""int64 token ids as SGLang passes them: read in place by the core, checked where stored."""

from array import array

import numpy as np
import pytest

import kvsim

from test_recording import cli, footer, needs_cli

BIG = 2**31  # the first id that does not fit kvsim's 32-bit tokens


def assert_replays(path):
    """`kvsim replay` of the recording: exit 0 and every recorded outcome reproduced."""
    out = cli("replay", path)
    assert out.returncode == 0 and "replay matches the recording" in out.stdout, out.stdout


def state(t):
    return (t.node_count(), t.total_size(), t.evictable_size(), sorted(t.node_ids()))


@pytest.mark.parametrize("page_size", [1, 4])
def test_wide_and_narrow_keys_give_the_same_results(page_size):
    wide, narrow = kvsim.RadixTree(page_size=page_size), kvsim.RadixTree(page_size=page_size)
    rng = np.random.default_rng(5)
    for i in range(200):
        key = rng.integers(0, 3, size=int(rng.integers(1, 24)), dtype=np.int64)
        slots = np.arange(1000 * i, 1000 * i + len(key), dtype=np.int64)
        assert wide.insert(array("q", key.tolist()), slots) == narrow.insert(key.astype(np.int32), slots)
        probe = rng.integers(0, 3, size=int(rng.integers(1, 24)), dtype=np.int64)
        (a, na), (b, nb) = wide.match_prefix(probe), narrow.match_prefix(probe.astype(np.int32))
        assert a.tolist() == b.tolist() and na == nb
    assert state(wide) == state(narrow)
    assert wide.sanity_check() == [] == narrow.sanity_check()


def test_a_match_stops_before_an_id_no_key_can_hold():
    t = kvsim.RadixTree(page_size=2)
    t.insert([1, 2, 3, 4], [10, 11, 12, 13])
    for bad in (BIG, -BIG - 1, 3 + 2**32):  # 3 + 2**32 narrows to 3: must not match it
        idx, _ = t.match_prefix(np.array([1, 2, bad, 4], dtype=np.int64))
        assert idx.tolist() == [10, 11]


def test_an_insert_of_an_id_out_of_range_raises_and_changes_nothing():
    t = kvsim.RadixTree(page_size=2)
    t.insert([1, 2, 3, 4, 5, 6], list(range(10, 16)))
    before = state(t)
    # [1, 2, 3, 4] matches the first node partly (a split, were the call to go on)
    with pytest.raises(ValueError, match=r"tokens\[4\] = 2147483648 .*32-bit"):
        t.insert(np.array([1, 2, 3, 4, BIG, 7], dtype=np.int64), np.arange(20, 26))
    assert state(t) == before and t.sanity_check() == [] and not t.poisoned
    idx, _ = t.match_prefix([1, 2, 3, 4, 5, 6])
    assert idx.tolist() == list(range(10, 16))


def test_only_the_slots_an_insert_stores_are_read():
    t = kvsim.RadixTree(page_size=2)
    t.insert([1, 2, 3, 4], [10, 11, 12, 13])
    # the cached part keeps the tree's slots; the caller's there are duplicates it frees
    assert t.insert([1, 2, 3, 4, 5, 6], [-1, -1, -1, -1, 14, 15])[0] == 4
    assert t.match_prefix([1, 2, 3, 4, 5, 6])[0].tolist() == [10, 11, 12, 13, 14, 15]
    with pytest.raises(ValueError, match=r"value\[6\] = -2 is not a slot index"):
        t.insert([1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, -2, 9])
    assert t.total_size() == 6 and t.sanity_check() == []


@needs_cli
def test_what_a_trace_cannot_hold_stops_the_recording_not_the_call(tmp_path):
    path = str(tmp_path / "w.jsonl")
    t = kvsim.RadixTree(page_size=2, record=path)
    t.insert(np.array([1, 2, 3, 4], dtype=np.int64), np.array([10, 11, 12, 13]))
    t.match_prefix(array("q", [1, 2, 3, 4]))
    assert t.recording
    assert t.match_prefix(np.array([1, 2, BIG, 0], dtype=np.int64))[0].tolist() == [10, 11]
    assert not t.recording  # a 32-bit trace cannot spell that key
    end, calls = footer(path)
    assert calls == 2 and end["truncated"]
    assert cli("replay", path).returncode == 0

    # The slots of the part the tree already holds are neither read nor recorded ("val_from"):
    # a negative duplicate neither fails the call nor ends the recording.
    path2 = str(tmp_path / "n.jsonl")
    t2 = kvsim.RadixTree(page_size=2, record=path2)
    t2.insert([1, 2], [10, 11])
    assert t2.insert([1, 2, 3, 4], [-1, -1, 12, 13])[0] == 2
    assert t2.recording and t2.total_size() == 4
    with pytest.raises(ValueError, match="not a slot index"):  # refused: not recorded either
        t2.insert([1, 2, 3, 4, 5, 6], [0, 0, 0, 0, -5, 7])
    t2.close_recording()
    end, calls = footer(path2)
    assert calls == 2 and not end.get("truncated")
    lines = open(path2).read().splitlines()
    assert '"val_from":2' in lines[2]
    assert_replays(path2)


@needs_cli
@pytest.mark.parametrize("page_size", [2, 4])
def test_a_match_keeps_its_hit_and_one_page_so_later_ids_need_not_fit(tmp_path, page_size):
    # The tree's walk stops at the first page it cannot match: the recording keeps the hit and
    # that page, and a replay of the cut key stops there too. Ids past it are never read, so
    # one that a 32-bit trace cannot spell does not end the recording.
    P = page_size
    path = str(tmp_path / "k.jsonl")
    t = kvsim.RadixTree(page_size=P, record=path)
    t.insert(np.arange(1, 2 * P + 1, dtype=np.int64), np.arange(10, 10 + 2 * P))
    t.match_prefix(np.arange(1, 2 * P + 1, dtype=np.int64))  # names the inserted node
    key = np.concatenate([np.arange(1, P + 1), [99] * P, [BIG] * P, np.arange(5, 5 + 3 * P)])
    slots, node = t.match_prefix(key.astype(np.int64))
    assert slots.tolist() == list(range(10, 10 + P))  # a split: the hit ends inside the node
    assert t.recording
    # An insert of the same key names the kept page and lists the rest (cut ids would be
    # refused by the insert itself: insert only the part that fits, then a longer one).
    lock = t.lock(node)
    fit = np.concatenate([np.arange(1, P + 1), [99] * P, np.arange(5, 5 + 3 * P)]).astype(np.int64)
    assert t.insert(fit, np.arange(100, 100 + len(fit)))[0] == P
    t.unlock(lock)
    assert t.match_prefix(fit)[0].tolist() == list(range(10, 10 + P)) + list(range(100 + P, 100 + len(fit)))
    t.close_recording()
    end, calls = footer(path)
    assert calls == 7 and not end.get("truncated")
    assert_replays(path)


@needs_cli
def test_a_recorded_session_of_wide_ids_replays(tmp_path):
    path = str(tmp_path / "r.jsonl")
    t = kvsim.RadixTree(page_size=4, record=path)
    rng = np.random.default_rng(9)
    for i in range(100):
        key = rng.integers(0, 4, size=int(rng.integers(4, 40)), dtype=np.int64)
        _, node = t.match_prefix(key)
        lock = t.lock(node)
        n = len(key) // 4 * 4
        t.insert(key, np.arange(100 * i, 100 * i + n, dtype=np.int64))
        t.unlock(lock)
        if i % 10 == 9:
            t.evict(30)
    t.close_recording()
    assert_replays(path)


@needs_cli
@pytest.mark.parametrize("page_size", [1, 4])
def test_an_insert_is_recorded_whatever_it_shares_with_the_last_match(tmp_path, page_size):
    # The recorder names an insert's tokens by the last match's path when the insert's path
    # runs through it; every other case spells them out. Each case must replay exactly.
    P = page_size
    path = str(tmp_path / "s.jsonl")
    t = kvsim.RadixTree(page_size=P, record=path)
    a = np.arange(1, 1 + 8 * P, dtype=np.int64)
    t.insert(a, np.arange(100, 100 + 8 * P))
    slot = 1000

    def ins(key):
        nonlocal slot
        n = len(key) // P * P
        t.insert(key, np.arange(slot, slot + n))
        slot += n

    t.match_prefix(a)
    ins(np.concatenate([a, np.arange(500, 500 + 2 * P)]))  # extends the match: shares all of it
    t.match_prefix(a)
    ins(np.concatenate([a[: 3 * P], np.arange(600, 600 + 3 * P)]))  # diverges inside the hit
    t.match_prefix(np.concatenate([a[: 2 * P], np.arange(700, 700 + 2 * P)]))  # a miss after 2 pages
    ins(np.concatenate([a[: 2 * P], np.arange(700, 700 + 4 * P)]))  # shares hit and miss
    t.match_prefix(a, 1)
    ins(a)  # the same tokens in another namespace: nothing named across namespaces
    _, node = t.match_prefix(np.arange(900, 900 + 2 * P, dtype=np.int64))
    ins(np.arange(900, 900 + 2 * P))
    t.match_prefix(np.arange(900, 900 + 2 * P, dtype=np.int64))
    t.evict(10**6)  # the matched node goes before the insert that follows
    ins(np.arange(900, 900 + 3 * P))
    t.close_recording()
    assert_replays(path)
