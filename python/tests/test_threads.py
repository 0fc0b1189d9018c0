"""The module under threads (docs/sglang.md, "Threads"): one mutex per tree serialises calls,
results are read under it, a core assertion raises on any thread, and a Lock belongs to the
tree that took it."""

import os
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kvsim

PROMPT = 5_000  # above the module's GIL-release threshold (2,048 tokens)


def _stress(page_size, threads=4, rounds=150, seed=29):
    """Threads insert and match 5,000-token prompts sharing prefixes, with evicts in between;
    every returned node id is checked against the tree (the path it names is the prompt's)."""
    t = kvsim.RadixTree(page_size=page_size)
    # Prompts share a few prefixes so matches split nodes other threads hold results of.
    bases = [np.arange(b * 100_000, b * 100_000 + PROMPT, dtype=np.int32) for b in range(3)]
    problems = []
    calls = [0]
    calls_mu = threading.Lock()

    def check(kind, node, prompt, length):
        if not isinstance(node, int) or node < 0 or node > 4 * (calls[0] + 1) * PROMPT:
            problems.append(f"{kind} returned node id {node!r}: not an id this tree issued")
            return
        try:
            path = t.path_tokens(node)
        except ValueError:
            return  # evicted since by another thread: ids are never reused
        # A node keeps its id and its path through later splits (the new node is the prefix).
        if len(path) < length or not np.array_equal(path[:length], prompt[:length]):
            problems.append(f"{kind} returned node {node} whose path is not the prompt's prefix")

    def worker(k):
        rng = random.Random(seed * 100 + k)
        try:
            for i in range(rounds):
                base = bases[rng.randrange(len(bases))]
                cut = rng.randrange(1, PROMPT // page_size) * page_size
                prompt = base.copy()
                prompt[cut:] += 1_000_000 * (k + 1) + i  # a suffix of this thread's own
                slots = np.arange(PROMPT, dtype=np.int64) + (k * rounds + i) * PROMPT
                with calls_mu:
                    calls[0] += 2
                prefix_len, node = t.insert(prompt, slots)
                check("insert", node, prompt, PROMPT // page_size * page_size)
                got, node = t.match_prefix(prompt)
                check("match_prefix", node, prompt, len(got))
                if i % 2 == k % 2:
                    # Everything unlocked, the nodes just returned to other threads included:
                    # LRU would otherwise spare them.
                    t.evict(10**9 if rng.random() < 0.7 else PROMPT)
        except Exception as e:  # reported below
            problems.append(f"thread {k}: {type(e).__name__}: {e}")

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert problems == []
    assert t.sanity_check() == []
    assert not t.poisoned


@pytest.mark.parametrize("page_size", [1, 16])
def test_threads_get_ids_of_their_own_results(page_size):
    _stress(page_size)


def _run(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_core_assertion_on_another_thread_raises():
    # The handler that turns a core assertion into CoreAssertionError is per thread; a thread
    # other than the importing one used to abort the interpreter (exit 134). In a child, so an
    # abort is seen as one.
    r = _run("""
        import threading, kvsim
        t = kvsim.RadixTree()
        t.insert([1, 2], [1, 2])
        _, node = t.match_prefix([1, 2])
        lock = t.lock(node)
        t.unlock(lock)
        t.evict(2)
        seen = []
        def worker():
            try:
                t.unlock(lock)
            except kvsim.CoreAssertionError as e:
                seen.append(type(e).__name__)
        th = threading.Thread(target=worker)
        th.start(); th.join()
        print(seen[0] if seen else "nothing raised", t.poisoned)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "CoreAssertionError True"


def test_a_lock_of_another_tree_is_a_caller_error():
    a = kvsim.RadixTree()
    b = kvsim.RadixTree()
    a.insert([1, 2], [1, 2])
    b.insert([1, 2], [5, 6])
    _, node = a.match_prefix([1, 2])
    lock = a.lock(node)
    with pytest.raises(ValueError, match="taken on another tree"):
        b.unlock(lock)
    assert not b.poisoned and not a.poisoned
    assert b.sanity_check() == []
    assert a.unlock(lock) == 2  # the lock still works on its own tree
    assert a.evictable_size() == 2
