"""kvsim.sglang: SGLang's prefix-cache contract (``BasePrefixCache``) on kvsim's core.

``KvsimRadixCache`` behaves as SGLang's ``RadixCache`` (device tier only): int64 index tensors,
``value=None`` meaning the tokens are the value, eviction of whole LRU leaves returning their
slots to the allocator's ``free_segment``, lock references, ``cache_finished_req`` /
``cache_unfinished_req``, sizes, ``reset``, ``pretty_print``, KV events (``BlockStored`` /
``BlockRemoved`` / ``AllBlocksCleared`` with SGLang's SHA-256 hash chains) and ``extra_key``
namespaces. The tree itself is kvsim's (``kvsim.RadixTree``): a logical clock instead of
wall-clock LRU stamps, core invariants checked by ``sanity_check()``.

SGLang is not a dependency of kvsim: this module imports nothing from SGLang until the class is
first used (``kvsim.sglang.KvsimRadixCache`` is built on first access, PEP 562), so
``import kvsim.sglang`` works anywhere. docs/sglang.md lists what is not covered (HiCache's host
tier, SWA / Mamba hybrids, EAGLE bigram keys, priorities).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from typing import Any, Dict, List, Optional

import kvsim

# numpy is imported where it is used (it is a dependency of the calls, not of the import):
# `import kvsim, kvsim.sglang` works in any Python 3 that can load the module.

__all__ = ["KvsimRadixCache", "KvsimNode", "page_hashes", "hash_to_int64", "SGLANG_REVISION"]

# The SGLang revision whose contract this adapter was written and checked against.
SGLANG_REVISION = "bytedance-iaas/sglang 6ed5780c4fd3 (v0.5.17-18, 2026-08-22)"

_SUPPORTED_POLICIES = ("lru", "lfu")


def page_hashes(tokens, page_size: int, prior: Optional[bytes] = None) -> List[str]:
    """SGLang's position-aware page hash chain (mem_cache/utils.py get_hash_str): page k is
    SHA-256(digest of page k-1 || page k's tokens as little-endian uint32), hex strings."""
    import numpy as np

    a = np.asarray(tokens, dtype=np.int64).astype("<u4").tobytes()
    out = []
    step = 4 * page_size
    for start in range(0, len(a), step):
        h = hashlib.sha256()
        if prior is not None:
            h.update(prior)
        h.update(a[start : start + step])
        prior = h.digest()
        out.append(h.hexdigest())
    return out


def hash_to_int64(hex_digest: str) -> int:
    """SGLang's hash_str_to_int64: the first 64 bits as a signed integer (event block ids)."""
    v = int(hex_digest[:16], 16)
    return v - (1 << 64) if v >= (1 << 63) else v


class _NodeKey:
    """The part of SGLang's RadixKey that code reads off a node: length and token_ids."""

    __slots__ = ("token_ids", "extra_key")

    def __init__(self, token_ids, extra_key):
        self.token_ids = token_ids
        self.extra_key = extra_key

    def __len__(self):
        return len(self.token_ids)


class KvsimNode:
    """Handle of one kvsim tree node, standing where SGLang passes a TreeNode. One handle per
    live node (identity is stable while the node lives); its fields are read from the core."""

    __slots__ = ("_cache", "id", "_gone")

    def __init__(self, cache: "KvsimRadixCache", node_id: int):
        self._cache = cache
        self.id = node_id
        self._gone = False

    def _info(self):
        return self._cache._tree.node_info(self.id)

    @property
    def evicted(self) -> bool:
        return self._gone or self._info()["evicted"]

    @property
    def backuped(self) -> bool:
        return False  # device tier only

    @property
    def host_value(self):
        return None

    @property
    def lock_ref(self) -> int:
        if self.id == self._cache._tree.root_id:
            return 1  # SGLang's root holds a permanent reference
        return self._info()["lock_ref"]

    @property
    def parent(self) -> Optional["KvsimNode"]:
        p = self._info()["parent"]
        return None if p is None else self._cache._handle(p)

    @property
    def children(self) -> Dict[Any, "KvsimNode"]:
        """Children keyed as SGLang's RadixKey.child_key: the first token (page 1) or a tuple
        of the first page, prefixed by the extra_key when there is one."""
        c = self._cache
        out = {}
        for cid in self._info()["children"]:
            key = c._tree.node_key(cid)
            page = int(key[0]) if c.page_size == 1 else tuple(int(t) for t in key[: c.page_size])
            extra = c._extra_of(c._tree.node_info(cid)["namespace"])
            out[page if extra is None else (extra, page)] = c._handle(cid)
        return out

    @property
    def key(self) -> _NodeKey:
        info = self._info()
        tokens = array("q", (int(t) for t in self._cache._tree.node_key(self.id)))
        return _NodeKey(tokens, self._cache._extra_of(info["namespace"]))

    @property
    def value(self):
        return self._cache._tensor(self._cache._tree.node_value(self.id))

    @property
    def hash_value(self) -> Optional[List[str]]:
        """Per-page hashes of this node (SGLang's chain over the whole path); [] at the root."""
        c = self._cache
        path = c._tree.path_tokens(self.id)
        n = c._tree.node_info(self.id)["tokens"]
        hashes = page_hashes(path, c.page_size)
        return hashes[len(hashes) - n // c.page_size :] if n else []

    def get_last_hash_value(self) -> Optional[str]:
        h = self.hash_value
        return h[-1] if h else None

    def get_prefix_hash_values(self, node) -> List[str]:
        if node is None or node.id == self._cache._tree.root_id:
            return []
        return page_hashes(self._cache._tree.path_tokens(node.id), self._cache.page_size)

    def __repr__(self):
        return f"KvsimNode(id={self.id})"


def _build_class():
    """Builds KvsimRadixCache on SGLang's BasePrefixCache (imported now, not at import time)."""
    import numpy as np
    from sglang.srt.mem_cache import base_prefix_cache as bpc

    try:
        import torch  # SGLang always has it; kvsim's own tests may not
    except ImportError:  # pragma: no cover - depends on the machine
        torch = None

    _MatchResult, _InsertResult = bpc.MatchResult, bpc.InsertResult
    _IncLockRefResult, _DecLockRefResult = bpc.IncLockRefResult, bpc.DecLockRefResult

    class KvsimRadixCache(bpc.BasePrefixCache):
        """SGLang RadixCache contract on kvsim's core (device tier)."""

        def __init__(
            self,
            params,
            *,
            record: Optional[str] = None,
            record_window: int = 0,
            record_window_seconds: float = 0.0,
        ):
            self.disable = params.disable
            self.req_to_token_pool = params.req_to_token_pool
            self.token_to_kv_pool_allocator = params.token_to_kv_pool_allocator
            self.page_size = params.page_size
            self.enable_kv_cache_events = getattr(params, "enable_kv_cache_events", False)
            self.is_eagle = getattr(params, "is_eagle", False)
            self.disable_finished_insert = getattr(params, "disable_finished_insert", False)
            self.eviction_policy = getattr(params, "eviction_policy", "lru").lower()
            if self.is_eagle:
                raise NotImplementedError("kvsim.sglang: EAGLE bigram keys are not supported yet")
            if self.eviction_policy not in _SUPPORTED_POLICIES:
                raise ValueError(
                    f"kvsim.sglang: eviction policy {self.eviction_policy!r} is not supported "
                    f"(supported: {', '.join(_SUPPORTED_POLICIES)})"
                )
            alloc = self.token_to_kv_pool_allocator
            dev = getattr(alloc, "device", None) if alloc is not None else None
            if torch is not None:
                self.device = torch.device(dev) if isinstance(dev, (str, torch.device)) else torch.device("cpu")
            else:
                self.device = "cpu"
            self._torch = torch
            self._host_device = self.device is None or str(self.device) == "cpu"
            self._ns_ids: Dict[Any, int] = {None: 0}
            self._ns_keys: Dict[int, Any] = {0: None}
            self._events_mod = None
            self.kv_event_queue: list = []
            # A directory (one call trace per tree, i.e. per reset) or None: KVSIM_RECORD; with a
            # window, the last N calls / S seconds in rotating segment files (docs/sglang.md).
            self._record = record
            self._record_window = record_window
            self._record_window_seconds = record_window_seconds
            self.reset()

        @classmethod
        def create_simulated(
            cls,
            disable: bool = False,
            mock_allocator: Optional[Any] = None,
            page_size: int = 1,
            enable_kv_cache_events: bool = False,
            eviction_policy: str = "lru",
            record: Optional[str] = None,
            record_window: int = 0,
            record_window_seconds: float = 0.0,
        ):
            """A cache without memory pools, as SGLang's RadixCache.create_simulated."""
            params = _Params(
                disable=disable,
                req_to_token_pool=None,
                token_to_kv_pool_allocator=mock_allocator,
                page_size=page_size,
                enable_kv_cache_events=enable_kv_cache_events,
                eviction_policy=eviction_policy,
            )
            return cls(
                params,
                record=record,
                record_window=record_window,
                record_window_seconds=record_window_seconds,
            )

        # ----- helpers -----
        def _tensor(self, arr):
            """int64 numpy array -> the result type SGLang expects (torch, no copy on CPU)."""
            if self._torch is None:
                return arr
            t = self._torch.from_numpy(arr)
            return t if self._host_device else t.to(self.device, non_blocking=True)

        def _cat(self, parts):
            if self._torch is not None and all(isinstance(p, self._torch.Tensor) for p in parts):
                return self._torch.cat(parts)
            return np.concatenate([np.asarray(p) for p in parts])

        def _ns(self, extra_key) -> int:
            ns = self._ns_ids.get(extra_key)
            if ns is None:
                ns = len(self._ns_ids)
                self._ns_ids[extra_key] = ns
                self._ns_keys[ns] = extra_key
            return ns

        def _extra_of(self, ns: int):
            return self._ns_keys.get(ns)

        def _handle(self, node_id: int) -> KvsimNode:
            h = self._handles.get(node_id)
            if h is None:
                h = KvsimNode(self, node_id)
                self._handles[node_id] = h
            return h

        @staticmethod
        def _key_tokens(key):
            tokens = key.token_ids
            limit = getattr(key, "limit", None)
            if limit is not None and limit < len(tokens):
                tokens = tokens[:limit]
            if getattr(key, "is_bigram", False):
                raise NotImplementedError("kvsim.sglang: bigram (EAGLE) keys are not supported yet")
            return tokens

        def _events(self):
            if self._events_mod is None:
                from sglang.srt.disaggregation import kv_events

                self._events_mod = kv_events
            return self._events_mod

        def _free(self, indices, start_pos: int = 0):
            alloc = self.token_to_kv_pool_allocator
            if alloc is None or len(indices) == 0:
                return
            if hasattr(alloc, "free_segment"):
                alloc.free_segment(indices, start_pos=start_pos)
            else:  # older SGLang allocators
                alloc.free(indices)

        # ----- BasePrefixCache -----
        def reset(self):
            old = getattr(self, "_tree", None)
            if old is not None:
                old.close_recording()
            self._tree = kvsim.RadixTree(
                self.page_size,
                self.eviction_policy,
                record=self._record,
                record_window=self._record_window,
                record_window_seconds=self._record_window_seconds,
            )
            t = self._tree
            self._match, self._insert, self._lock, self._unlock = t.match_prefix, t.insert, t.lock_ref, t.unlock_ref
            self._from_numpy = torch.from_numpy if torch is not None else (lambda a: a)
            self._handles: Dict[int, KvsimNode] = {}
            self.root_node = self._handle(self._tree.root_id)
            self._empty = bpc.MatchResult(
                device_indices=self._tensor(np.empty(0, dtype=np.int64)),
                last_device_node=self.root_node,
                last_host_node=self.root_node,
                best_match_node=self.root_node,
            )
            if self.enable_kv_cache_events:
                self.kv_event_queue.append(self._events().AllBlocksCleared())

        # The hot calls (match_prefix, insert, inc/dec_lock_ref) make one binding call each and
        # read the tree's bound methods and SGLang's result types from cached names.
        def match_prefix(self, params):
            key = params.key
            if self.disable:
                return self._empty
            tokens = key.token_ids
            try:  # SGLang's RadixKey always has both (its __slots__); a stand-in may not
                special = key.limit is not None or key.is_bigram
            except AttributeError:
                special = getattr(key, "limit", None) is not None or getattr(key, "is_bigram", False)
            if special:
                tokens = self._key_tokens(key)
            if len(tokens) < self.page_size:
                return self._empty
            ns = self._ns_ids.get(key.extra_key)
            indices, node_id = self._match(tokens, self._ns(key.extra_key) if ns is None else ns)
            node = self._handles.get(node_id)
            if node is None:
                node = self._handle(node_id)
            return _MatchResult(
                self._from_numpy(indices) if self._host_device else self._tensor(indices), node, node, node
            )

        def insert(self, params):
            if self.disable:
                return _InsertResult(prefix_len=0)
            key = params.key
            tokens = key.token_ids
            try:
                special = key.limit is not None or key.is_bigram
            except AttributeError:
                special = getattr(key, "limit", None) is not None or getattr(key, "is_bigram", False)
            if special:
                tokens = self._key_tokens(key)
            value = params.value
            if value is None:
                value = tokens  # SGLang's debug/test fallback: the tokens are the value
            ns = self._ns_ids.get(key.extra_key)
            # Torch tensors go to the binding as they are (CPU: read in place; others: copied).
            prefix_len, node_id = self._insert(tokens, value, self._ns(key.extra_key) if ns is None else ns)
            if self.enable_kv_cache_events:
                self._record_store(tokens, prefix_len)
            node = self._handles.get(node_id)
            if node is None:
                node = self._handle(node_id)
            return _InsertResult(prefix_len=prefix_len, last_device_node=node)

        def cache_finished_req(self, req, is_insert: bool = True, *, kv_len_to_handle=None, **kwargs):
            if self.disable_finished_insert:
                is_insert = False
            token_ids = req.origin_input_ids + req.output_ids
            if kv_len_to_handle is None:
                kv_len_to_handle = len(token_ids)
            if self.disable:
                kv_indices = self.req_to_token_pool.req_to_token[
                    req.req_pool_idx, req.cache_protected_len : kv_len_to_handle
                ]
                self._free(kv_indices, start_pos=req.cache_protected_len)
                return
            token_ids = token_ids[:kv_len_to_handle]
            kv_indices = self.req_to_token_pool.req_to_token[req.req_pool_idx, : len(token_ids)]
            key_len = len(token_ids) // self.page_size * self.page_size
            if is_insert:
                key = _Key(token_ids[:key_len], req.extra_key)
                values = kv_indices[:key_len]
                result = self.insert(bpc.InsertParams(key=key, value=values))
                freed_end = result.prefix_len
            else:
                freed_end = key_len
            # The duplicates (or the uninserted range), then the unaligned tail.
            self._free(kv_indices[req.cache_protected_len : freed_end], req.cache_protected_len)
            self._free(kv_indices[key_len:], key_len)
            if req.last_node is not None:
                self.dec_lock_ref(req.last_node)

        def cache_unfinished_req(self, req, chunked: bool = False, **kwargs):
            if self.disable:
                return
            token_ids = req.get_fill_ids()
            kv_indices = self.req_to_token_pool.req_to_token[req.req_pool_idx, : len(token_ids)]
            key_len = len(token_ids) // self.page_size * self.page_size
            key = _Key(token_ids[:key_len], req.extra_key)
            result = self.insert(bpc.InsertParams(key=key, value=kv_indices[:key_len], chunked=chunked))
            self._free(kv_indices[req.cache_protected_len : result.prefix_len], req.cache_protected_len)
            m = self.match_prefix(bpc.MatchPrefixParams(key=key))
            new_indices, new_last_node = m.device_indices, m.last_device_node
            if len(new_indices) != key_len:
                raise kvsim.KvsimError(
                    f"cache_unfinished_req: re-match found {len(new_indices)} of {key_len} tokens"
                )
            self.req_to_token_pool.write(
                (req.req_pool_idx, slice(req.cache_protected_len, len(new_indices))),
                new_indices[req.cache_protected_len :],
            )
            req.cache_protected_len = len(new_indices)
            self.dec_lock_ref(req.last_node)
            self.inc_lock_ref(new_last_node)
            if len(new_indices) < len(kv_indices):
                req.prefix_indices = self._cat([new_indices, kv_indices[len(new_indices) :]])
            else:
                req.prefix_indices = new_indices
            req.last_node = new_last_node

        def evict(self, params):
            if self.disable:
                return bpc.EvictResult()
            events = self.enable_kv_cache_events
            res = self._tree.evict(int(params.num_tokens), events)
            freed, nodes = res[0], res[1]
            if len(freed):
                self._free(self._tensor(freed), 0)
            for node_id, _ in nodes:
                h = self._handles.pop(node_id, None)
                if h is not None:
                    h._gone = True
            if events:
                self._record_removes(nodes, res[2])
            return bpc.EvictResult(num_tokens_evicted=len(freed))

        # The lock stacks live in the core (lock_ref / unlock_ref): dec_lock_ref releases the
        # lock its node took last, and raises KvsimError for a node inc_lock_ref never locked.
        def inc_lock_ref(self, node):
            if self.disable:
                return bpc.IncLockRefResult(delta=0)
            return _IncLockRefResult(delta=self._lock(node.id))

        def dec_lock_ref(self, node, params=None):
            if self.disable:
                return bpc.DecLockRefResult(delta=0)
            return _DecLockRefResult(delta=self._unlock(node.id))

        def evictable_size(self):
            return self._tree.evictable_size()

        def full_evictable_size(self):
            return self._tree.evictable_size()

        def protected_size(self):
            return self._tree.protected_size()

        def full_protected_size(self):
            return self._tree.protected_size()

        def total_size(self):
            return self._tree.total_size()

        def all_values_flatten(self):
            parts = [self._tree.node_value(i) for i in self._tree.node_ids() if i != self._tree.root_id]
            return self._tensor(np.concatenate(parts) if parts else np.empty(0, dtype=np.int64))

        def pretty_print(self):
            t = self._tree
            depth = {t.root_id: 0}
            for nid in t.node_ids():
                info = t.node_info(nid)
                d = 0 if info["parent"] is None else depth[info["parent"]] + 1
                depth[nid] = d
                print(" " * (2 * d), info["tokens"], list(t.node_key(nid)[:10]), f"r={info['lock_ref']}")
            print(f"#tokens: {self.total_size()}")

        def take_events(self):
            if not self.enable_kv_cache_events:
                return []
            events, self.kv_event_queue = self.kv_event_queue, []
            return events

        def sanity_check(self):
            """kvsim's invariants of the tree: [] or [(invariant, detail, node, slot)]."""
            return self._tree.sanity_check()

        @property
        def core(self) -> "kvsim.RadixTree":
            return self._tree

        # ----- KV events -----
        def _record_store(self, tokens, prefix_len: int):
            P = self.page_size
            aligned = len(tokens) // P * P
            if aligned <= prefix_len:
                return
            ev = self._events()
            hashes = page_hashes(np.asarray(tokens[:aligned], dtype=np.int64), P)
            first = prefix_len // P
            parent = hash_to_int64(hashes[first - 1]) if first > 0 else None
            for k in range(first, aligned // P):
                block = hash_to_int64(hashes[k])
                page = [int(t) for t in tokens[k * P : (k + 1) * P]]
                self.kv_event_queue.append(
                    ev.BlockStored(
                        block_hashes=[block],
                        parent_block_hash=parent,
                        token_ids=page,
                        block_size=len(page),
                        lora_id=None,
                        medium=ev.StorageMedium.GPU,
                    )
                )
                parent = block

        def _record_removes(self, nodes, paths):
            ev = self._events()
            P = self.page_size
            for (node_id, n), path in zip(nodes, paths):
                hashes = page_hashes(path, P)
                blocks = [hash_to_int64(h) for h in hashes[len(hashes) - n // P :]]
                if blocks:
                    self.kv_event_queue.append(ev.BlockRemoved(block_hashes=blocks, medium=ev.StorageMedium.GPU))

    return KvsimRadixCache


class _Params:
    """The CacheInitParams fields the adapter reads (create_simulated needs no SGLang import)."""

    def __init__(self, **kw):
        self.is_eagle = False
        self.disable_finished_insert = False
        self.enable_kv_cache_events = False
        self.eviction_policy = "lru"
        self.__dict__.update(kw)


class _Key:
    """A RadixKey-like key for the adapter's own inserts (tokens + extra_key)."""

    __slots__ = ("token_ids", "extra_key")

    def __init__(self, token_ids, extra_key):
        self.token_ids = token_ids
        self.extra_key = extra_key

    def __len__(self):
        return len(self.token_ids)


_cls = None


def __getattr__(name):  # PEP 562: build the class on first access, importing SGLang then
    global _cls
    if name == "KvsimRadixCache":
        if _cls is None:
            _cls = _build_class()
        return _cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _reset_for_tests():
    """Forget the built class (tests swap SGLang stand-ins between modules)."""
    global _cls
    _cls = None
    sys.modules[__name__].__dict__.pop("KvsimRadixCache", None)
