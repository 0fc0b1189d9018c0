"""kvsim._core round trips and error paths."""

import threading
from array import array

import numpy as np
import pytest

import kvsim


def test_insert_match_round_trip_page1():
    t = kvsim.RadixTree()
    assert t.insert(array("q", [1, 2, 3]), np.array([10, 20, 30], dtype=np.int64)) == (0, t.node_ids()[1])
    idx, node = t.match_prefix(array("q", [1, 2, 3, 4]))
    assert idx.dtype == np.int64 and idx.tolist() == [10, 20, 30]
    assert node != t.root_id
    # a partial match splits the node and returns the front half's slots
    idx, node = t.match_prefix([1, 2, 9])
    assert idx.tolist() == [10, 20]
    assert t.node_info(node)["tokens"] == 2
    assert t.total_size() == 3 and t.node_count() == 3
    assert t.sanity_check() == []


def test_page_alignment_and_prefix_len():
    t = kvsim.RadixTree(page_size=4)
    assert t.insert(list(range(10)), list(range(100, 110)))[0] == 0
    assert t.total_size() == 8  # the unaligned tail is not stored
    idx, _ = t.match_prefix(list(range(7)))
    assert idx.tolist() == [100, 101, 102, 103]
    prefix_len, _ = t.insert(list(range(12)), list(range(200, 212)))
    assert prefix_len == 8
    idx, _ = t.match_prefix(list(range(12)))
    assert idx.tolist() == list(range(100, 108)) + [208, 209, 210, 211]


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_values_keep_every_slot_whatever_their_layout(dtype):
    # Pages of consecutive slots are stored one index per page, others one per token; a match
    # (and the split it makes) must give back exactly the slots inserted, either way.
    t = kvsim.RadixTree(page_size=4)
    consecutive = [40, 41, 42, 43, 8, 9, 10, 11]
    scrambled = [7, 3, 5, 1]
    t.insert(np.arange(8), np.array(consecutive, dtype=dtype))
    t.insert(np.arange(12), np.array(consecutive + scrambled, dtype=dtype))
    idx, _ = t.match_prefix(np.arange(4))  # splits the first node inside its pages
    assert idx.tolist() == consecutive[:4]
    idx, _ = t.match_prefix(np.arange(12))
    assert idx.tolist() == consecutive + scrambled
    assert t.sanity_check() == []


def test_namespaces_are_disjoint():
    t = kvsim.RadixTree()
    t.insert([1, 2], [5, 6], namespace=1)
    assert t.match_prefix([1, 2], namespace=0)[0].size == 0
    assert t.match_prefix([1, 2], namespace=1)[0].tolist() == [5, 6]


def test_results_own_their_storage_without_copies():
    t = kvsim.RadixTree()
    t.insert(np.arange(5000, dtype=np.int32), np.arange(5000, dtype=np.int64))
    idx, _ = t.match_prefix(np.arange(5000, dtype=np.int32))
    # the array wraps the core's vector (a capsule owns it), not a numpy-allocated copy
    assert not idx.flags["OWNDATA"] and idx.base is not None
    assert idx.flags["C_CONTIGUOUS"] and idx.tolist() == list(range(5000))
    view = memoryview(idx)
    assert view.format in ("l", "q") and view.itemsize == 8


def test_torch_reads_results_in_place():
    torch = pytest.importorskip("torch")
    t = kvsim.RadixTree()
    t.insert(torch.tensor([1, 2, 3]), torch.tensor([7, 8, 9], dtype=torch.int64))
    idx, _ = t.match_prefix(torch.tensor([1, 2, 3], dtype=torch.int32))
    tt = torch.from_numpy(idx)
    assert tt.dtype == torch.int64 and tt.tolist() == [7, 8, 9]
    assert tt.data_ptr() == idx.ctypes.data


def test_torch_tensors_are_read_in_place_or_refused_by_name():
    torch = pytest.importorskip("torch")
    t = kvsim.RadixTree()
    base = torch.arange(0, 20, dtype=torch.int64)
    # A slice starts past the storage's start: its data pointer is read, not the storage's.
    assert t.insert(base[10:14], torch.arange(100, 104, dtype=torch.int32))[0] == 0
    assert t.match_prefix(torch.tensor([10, 11, 12, 13], dtype=torch.int32))[0].tolist() == [100, 101, 102, 103]
    assert t.match_prefix(base[10:12])[0].tolist() == [100, 101]
    # Not read in place, each for its own reason, with the general path's messages.
    with pytest.raises(ValueError, match="contiguous"):
        t.match_prefix(base[::2])
    with pytest.raises(ValueError, match="1-D"):
        t.match_prefix(base.reshape(4, 5))
    with pytest.raises(TypeError, match="integer"):
        t.match_prefix(torch.tensor([1.0, 2.0]))
    # Other integer widths still work (widened once).
    assert t.match_prefix(torch.tensor([10, 11], dtype=torch.int16))[0].tolist() == [100, 101]
    assert t.sanity_check() == []


def test_lock_ref_stacks_locks_per_node_and_refuses_an_extra_release():
    t = kvsim.RadixTree()
    t.insert([1, 2, 3], [1, 2, 3])
    _, n = t.match_prefix([1, 2, 3])
    assert t.lock_ref(n) == -3 and t.lock_ref(n) == 0
    assert t.protected_size() == 3
    assert t.unlock_ref(n) == 0 and t.protected_size() == 3
    assert t.unlock_ref(n) == 3 and t.evictable_size() == 3
    with pytest.raises(kvsim.KvsimError, match="holds no lock"):
        t.unlock_ref(n)
    assert t.sanity_check() == [] and not t.poisoned


def test_lock_protects_from_eviction_and_unlock_releases():
    t = kvsim.RadixTree()
    t.insert([1, 2], [1, 2])
    t.insert([3, 4], [3, 4])
    _, n12 = t.match_prefix([1, 2])
    lock = t.lock(n12)
    assert lock.node == n12
    assert t.protected_size() == 2 and t.evictable_size() == 2
    freed, nodes = t.evict(100)
    assert sorted(freed.tolist()) == [3, 4] and len(nodes) == 1
    t.unlock(lock)
    assert t.evictable_size() == 2 and t.protected_size() == 0
    freed, _ = t.evict(1)
    assert freed.tolist() == [1, 2]  # whole leaves, even when asked for fewer tokens


def test_evict_is_lru_and_reports_paths():
    t = kvsim.RadixTree(page_size=2)
    t.insert([1, 1, 2, 2], [0, 1, 2, 3])
    t.insert([5, 5], [4, 5])
    t.match_prefix([1, 1, 2, 2])  # touch: [5,5] is now least recently used
    freed, nodes, paths = t.evict(2, with_paths=True)
    assert freed.tolist() == [4, 5]
    assert nodes == [(nodes[0][0], 2)] and paths[0].tolist() == [5, 5]
    assert t.stats()["evicted_tokens"] == 2 and t.stats()["evict_calls"] == 1


def test_stats_count_calls():
    t = kvsim.RadixTree()
    t.insert([1, 2, 3], [1, 2, 3])
    t.insert([1, 2, 3, 4], [9, 9, 9, 4])
    t.match_prefix([1, 2, 5])
    s = t.stats()
    assert (s["insert_calls"], s["insert_tokens"], s["new_tokens"]) == (2, 7, 4)
    assert (s["match_calls"], s["match_tokens"], s["hit_tokens"]) == (1, 3, 2)


@pytest.mark.parametrize(
    "call, exc, text",
    [
        (lambda t: t.insert([1, 2], [1]), ValueError, "fewer than"),
        (lambda t: t.insert([1], [-3]), ValueError, "not a slot index"),
        (lambda t: t.insert(array("q", [2**40]), [1]), ValueError, "32-bit"),
        (lambda t: t.insert(np.array([1.5]), [1]), TypeError, "integer dtype"),
        (lambda t: t.insert([1], np.array([1.0])), TypeError, "integer dtype"),
        (lambda t: t.insert(np.zeros((2, 2), dtype=np.int64), [1, 2]), ValueError, "1-D"),
        (lambda t: t.insert(np.arange(8, dtype=np.int64)[::2], [1, 2, 3, 4]), ValueError, "contiguous"),
        (lambda t: t.match_prefix("abc"), TypeError, "integer"),
        (lambda t: t.match_prefix([1, "x"]), TypeError, "integers"),
        (lambda t: t.match_prefix(None), TypeError, "buffer"),
        (lambda t: t.lock(12345), ValueError, "does not exist"),
        (lambda t: t.node_info(12345), ValueError, "does not exist"),
        (lambda t: t.evict(-1), ValueError, ">= 0"),
    ],
)
def test_bad_arguments_raise_and_leave_the_tree_usable(call, exc, text):
    t = kvsim.RadixTree()
    with pytest.raises(exc, match=text):
        call(t)
    assert not t.poisoned
    t.insert([1, 2], [3, 4])
    assert t.match_prefix([1, 2])[0].tolist() == [3, 4]


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="page_size"):
        kvsim.RadixTree(page_size=0)
    with pytest.raises(ValueError, match="unknown policy"):
        kvsim.RadixTree(eviction_policy="fifo")
    assert kvsim.RadixTree(eviction_policy="lfu").eviction_policy == "lfu"


def test_core_assertion_raises_and_poisons_only_that_tree():
    t = kvsim.RadixTree()
    other = kvsim.RadixTree()
    t.insert([1, 2], [1, 2])
    _, node = t.match_prefix([1, 2])
    lock = t.lock(node)
    t.unlock(lock)
    with pytest.raises(kvsim.CoreAssertionError, match="Cannot decrement reference count = zero"):
        t.unlock(lock)  # a double unlock violates the core's lock law
    assert t.poisoned and "core/tree/radix_tree" in t.poison_message
    for call in (lambda: t.match_prefix([1]), lambda: t.insert([3], [3]), lambda: t.total_size(),
                 lambda: t.evict(1), lambda: t.sanity_check()):
        with pytest.raises(kvsim.PoisonedError, match="Cannot decrement"):
            call()
    assert issubclass(kvsim.PoisonedError, kvsim.KvsimError)
    assert issubclass(kvsim.CoreAssertionError, RuntimeError)
    other.insert([1], [1])  # other trees keep working
    assert other.total_size() == 1


def test_unlock_of_an_evicted_anchor_is_a_core_assertion():
    t = kvsim.RadixTree()
    t.insert([1, 2], [1, 2])
    _, node = t.match_prefix([1, 2])
    lock = t.lock(node)
    t.unlock(lock)
    t.evict(2)
    with pytest.raises(kvsim.CoreAssertionError, match="vanished"):
        t.unlock(lock)
    assert t.poisoned


def test_large_calls_run_without_the_gil():
    # While a long insert runs (GIL released), another Python thread makes progress.
    t = kvsim.RadixTree()
    n = 2_000_000
    tokens = np.arange(n, dtype=np.int32)
    values = np.arange(n, dtype=np.int64)
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(1)

    th = threading.Thread(target=ticker)
    th.start()
    try:
        for _ in range(3):
            t.insert(tokens, values)
            t.match_prefix(tokens)
    finally:
        done.set()
        th.join()
    assert t.total_size() == n
    assert len(ticks) > 0


def test_concurrent_calls_are_serialised():
    t = kvsim.RadixTree(page_size=4)
    errors = []

    def worker(base):
        try:
            for i in range(200):
                toks = np.arange(base + i * 8, base + i * 8 + 4096, dtype=np.int32)
                t.insert(toks, np.arange(4096, dtype=np.int64) + base)
                t.match_prefix(toks)
                if i % 50 == 0:
                    t.evict(4096)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(b * 10_000_000,)) for b in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert t.sanity_check() == []
