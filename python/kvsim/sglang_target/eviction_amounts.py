"""How much the loaded SGLang revision evicts before an allocation, probed from its own code (never
read off a commit): the scheduler's `evict_from_tree_cache(tree_cache, num_tokens)` with the
standard (non-SWA) allocator asks the tree for the whole `num_tokens` when the pool is short
(every revision up to May 2026) or only the shortfall, `num_tokens - available` (the August 2026
snapshot). kvsim's differential runs kvsim's core beside SGLang's cache with the same amount
(sim/model/differential_cache.cpp), so it needs to know which one the loaded code asks."""

import importlib


class _Allocator:
    """Stands in for the standard allocator: `available` tokens free (no SWA arm: its class is
    not SWATokenToKVPoolAllocator)."""

    def __init__(self, available):
        self._available = available

    def available_size(self):
        return self._available


class _Tree:
    """Records what evict_from_tree_cache asks of the tree."""

    def __init__(self, allocator):
        self.token_to_kv_pool_allocator = allocator
        self.asked = []

    def is_chunk_cache(self):
        return False

    def evict(self, params):
        self.asked.append(int(getattr(params, "num_tokens", params)))


def evict_before_alloc(mods):
    """"shortfall" when the loaded revision's evict_from_tree_cache asks the tree for the shortfall
    only, "whole" when it asks the whole amount; None when the revision has no such helper or it
    does not run on the stand-ins (the differential then keeps the shortfall, the newest one)."""
    try:
        common = mods["sglang.srt.mem_cache.common"]
    except (KeyError, ImportError):
        common = None
    if common is None or not hasattr(common, "evict_from_tree_cache"):
        try:
            common = importlib.import_module("sglang.srt.mem_cache.common")
        except Exception:  # noqa: BLE001 - no helper: unknown
            return None
    fn = getattr(common, "evict_from_tree_cache", None)
    if fn is None:
        return None
    tree = _Tree(_Allocator(available=3))
    try:
        fn(tree, 10)
    except Exception:  # noqa: BLE001 - a helper that needs more than the stand-ins: unknown
        return None
    if tree.asked == [7]:
        return "shortfall"
    if tree.asked == [10]:
        return "whole"
    return None
