"""Hypothesis stateful test: kvsim.sglang against a plain Python model of a paged LRU prefix
cache (a prefix-closed set of pages per namespace, each page with its slots).

The model predicts every match (hit length and indices) and insert (prefix length) exactly, the
protected / evictable / total sizes, and the allocator's state (every slot in use is held by
exactly one cached page; nothing freed twice). For evict it checks what any whole-leaf LRU
eviction must satisfy: only unlocked pages go, the rest stays prefix-closed, the slots of
removed pages go back to the allocator, and at least the asked tokens go when that many were
evictable.
"""

from array import array

import hypothesis.strategies as st
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sglang.srt.mem_cache import base_prefix_cache as bpc
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang_fakes import FakeAllocator

from kvsim.sglang import KvsimRadixCache

VOCAB = st.integers(min_value=0, max_value=3)  # few tokens: shared prefixes and mid-node splits
TOKENS = st.lists(VOCAB, min_size=0, max_size=14)
NAMESPACES = st.sampled_from([None, "tenant-a"])


class PrefixCacheModel(RuleBasedStateMachine):
    @initialize(page_size=st.sampled_from([1, 2, 4]), capacity=st.integers(min_value=8, max_value=40))
    def setup(self, page_size, capacity):
        self.P = page_size
        self.alloc = FakeAllocator(capacity + 1)
        self.cache = KvsimRadixCache.create_simulated(mock_allocator=self.alloc, page_size=page_size)
        self.pages = {}  # (ns, pages tuple) -> slots of its last page
        self.held = []  # (node, [page keys of its path])

    # --- model helpers ---
    def _page_keys(self, tokens, ns):
        P = self.P
        n = len(tokens) // P
        return [(ns, tuple(tuple(tokens[i * P : (i + 1) * P]) for i in range(k + 1))) for k in range(n)]

    def _hit(self, tokens, ns):
        keys = self._page_keys(tokens, ns)
        hit = 0
        while hit < len(keys) and keys[hit] in self.pages:
            hit += 1
        return keys, hit

    def _locked_pages(self):
        out = set()
        for _, path in self.held:
            out.update(path)
        return out

    def _match(self, tokens, ns):
        keys, hit = self._hit(tokens, ns)
        m = self.cache.match_prefix(bpc.MatchPrefixParams(key=RadixKey(array("q", tokens), ns)))
        expected = [s for k in keys[:hit] for s in self.pages[k]]
        assert np.asarray(m.device_indices).tolist() == expected
        return m, keys, hit

    def _evict(self, n):
        before = dict(self.pages)
        evictable = self.cache.evictable_size()
        locked = self._locked_pages()
        in_use_before = set(self.alloc.in_use)
        res = self.cache.evict(bpc.EvictParams(num_tokens=n))
        freed = in_use_before - self.alloc.in_use
        assert res.num_tokens_evicted == len(freed)
        by_slot = {s: k for k, slots in before.items() for s in slots}
        removed = {by_slot[s] for s in freed}
        for k in removed:
            assert k not in locked, "a locked page was evicted"
            assert set(before[k]) <= freed, "a page was evicted in part"
            del self.pages[k]
        for ns, path in self.pages:
            assert len(path) == 1 or (ns, path[:-1]) in self.pages, "eviction left a hole"
        assert res.num_tokens_evicted >= min(n, evictable)

    # --- rules ---
    @rule(tokens=TOKENS, ns=NAMESPACES)
    def request(self, tokens, ns):
        """A request as SGLang's scheduler runs it: match, lock, allocate, insert, unlock."""
        m, keys, hit = self._match(tokens, ns)
        node = m.last_device_node
        self.cache.inc_lock_ref(node)
        self.held.append((node, keys[:hit]))
        need = (len(keys) - hit) * self.P
        if self.alloc.available_size() < need:
            self._evict(need - self.alloc.available_size())
        if self.alloc.available_size() >= need:
            new = self.alloc.alloc(need)
            value = np.concatenate([np.asarray(m.device_indices, dtype=np.int64), new])
            res = self.cache.insert(bpc.InsertParams(key=RadixKey(array("q", tokens), ns), value=value))
            assert res.prefix_len == hit * self.P
            for i, k in enumerate(keys[hit:]):
                self.pages[k] = tuple(new[i * self.P : (i + 1) * self.P].tolist())
        self.held.pop()
        self.cache.dec_lock_ref(node)

    @rule(tokens=TOKENS, ns=NAMESPACES)
    def recomputed_insert(self, tokens, ns):
        """A request that recomputed its whole prompt: the cached part's slots are duplicates."""
        keys, hit = self._hit(tokens, ns)
        need = len(keys) * self.P
        if self.alloc.available_size() < need:
            return
        value = self.alloc.alloc(need)
        res = self.cache.insert(bpc.InsertParams(key=RadixKey(array("q", tokens), ns), value=value))
        assert res.prefix_len == hit * self.P
        self.alloc.free_segment(value[: res.prefix_len])
        for i, k in enumerate(keys[hit:], start=hit):
            self.pages[k] = tuple(value[i * self.P : (i + 1) * self.P].tolist())

    @rule(tokens=TOKENS, ns=NAMESPACES)
    def hold_lock(self, tokens, ns):
        m, keys, hit = self._match(tokens, ns)
        self.cache.inc_lock_ref(m.last_device_node)
        self.held.append((m.last_device_node, keys[:hit]))

    @precondition(lambda self: self.held)
    @rule(i=st.integers(min_value=0, max_value=100))
    def release_lock(self, i):
        node, _ = self.held.pop(i % len(self.held))
        self.cache.dec_lock_ref(node)

    @rule(n=st.integers(min_value=0, max_value=20))
    def evict(self, n):
        self._evict(n)

    # --- invariants ---
    @invariant()
    def sizes_and_slots_agree(self):
        if not hasattr(self, "cache"):
            return
        P = self.P
        total = len(self.pages) * P
        protected = len(self._locked_pages()) * P
        assert self.cache.total_size() == total
        assert self.cache.protected_size() == protected
        assert self.cache.evictable_size() == total - protected
        assert self.alloc.in_use == {s for slots in self.pages.values() for s in slots}
        assert self.cache.sanity_check() == []


TestPrefixCacheModel = PrefixCacheModel.TestCase
TestPrefixCacheModel.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
