"""SGLang's hybrid caches for the SGLang target: UnifiedRadixCache with FULL + SWA or FULL + Mamba
components and HiCache, built as SGLang's scheduler builds them — SGLang's own device pools where
they construct on the fake device (SWAKVPool, SWATokenToKVPoolAllocator, HybridReqToTokenPool,
HybridLinearKVPool), the per-layer KV pools inside them from kv_pool.build_kv_pool, and the host
side (HostPoolGroup, MHATokenToKVPoolHost, the SWA host pool, MambaPoolHost, HybridCacheController)
from SGLang's own assembler, `UnifiedRadixCache.init_hicache` ->
`attach_hybrid_pool_to_unified_cache` (May 2026: `build_hybrid_swa_stack`; August 2026: its
`_SwaStrategy`, which calls the same). Which revision has what is probed, never read off a
commit: the era's modules (eras.py: where SWATokenToKVPoolAllocator and ComponentType live) and
the built tree's layout (unified_tree.py: node objects in May, NodeIds and a tree core in August).

Scenario fields (kvsim's names): cache.swa_window_tokens > 0 -> FULL + SWA (sliding window of that
many tokens; cache.swa_device_tokens sizes the SWA pool, default device_tokens);
cache.mamba_device_states > 0 -> FULL + Mamba (that many device Mamba slots; host slots scale
with host_tokens / device_tokens)."""

import importlib

import torch

from kvsim.sglang_target.kv_pool import build_kv_pool
from kvsim.sglang_target.requests import ReqToTokenPool
from kvsim.sglang_target.target import (CacheConfig, Target, TargetConfigError, _call_with_supported,
                                        _server_args)

MC = "sglang.srt.mem_cache"


def hybrid_kind(scenario):
    """'swa', 'mamba' or None for a scenario's cache section; refuses both at once."""
    cache = (scenario or {}).get("cache") or {}
    swa, mamba = int(cache.get("swa_window_tokens", 0) or 0), int(cache.get("mamba_device_states", 0) or 0)
    if swa and mamba:
        raise TargetConfigError("cache.swa_window_tokens and cache.mamba_device_states: the SGLang target "
                                "builds FULL + SWA or FULL + Mamba, not both at once")
    return "swa" if swa else "mamba" if mamba else None


def hybrid_config(scenario):
    """(CacheConfig, kind, options) for a hybrid scenario. The hybrid fields are read here; the
    rest is CacheConfig's."""
    kind = hybrid_kind(scenario)
    cache = dict((scenario or {}).get("cache") or {})
    opts = {"swa_window_tokens": int(cache.pop("swa_window_tokens", 0) or 0),
            "swa_device_tokens": int(cache.pop("swa_device_tokens", 0) or 0),
            "mamba_device_states": int(cache.pop("mamba_device_states", 0) or 0)}
    cache.pop("sparse_index_bytes_per_page", None)
    for name in ("mamba_host_states", "mamba_layer_count", "mamba_state_bytes"):  # kvsim-core sizes
        cache.pop(name, None)
    cfg = CacheConfig.from_scenario({**(scenario or {}), "cache": cache})
    if cfg.storage_options() is not None:  # a drawn unit's disabled storage section is no tier
        raise TargetConfigError("cache.storage: the hybrid SGLang target has no storage tier yet")
    if not cfg.hierarchical:
        raise TargetConfigError("cache.hierarchical: the hybrid SGLang target builds HiCache only")
    if kind == "swa":
        if opts["swa_window_tokens"] < 1:
            raise TargetConfigError("cache.swa_window_tokens: must be positive")
        if not opts["swa_device_tokens"]:
            opts["swa_device_tokens"] = cfg.device_tokens
        if opts["swa_device_tokens"] % cfg.page_size:
            raise TargetConfigError(f"cache.swa_device_tokens: a multiple of page_size {cfg.page_size}")
    if kind == "mamba" and opts["mamba_device_states"] < 1:
        raise TargetConfigError("cache.mamba_device_states: must be positive")
    return cfg, kind, opts


def _module(name):
    return importlib.import_module(name)


def era_class(mods, name):
    """SGLang's class `name` from the first of the loaded era's modules for it that has it
    (eras.py: SWATokenToKVPoolAllocator is swa_memory_pool's in April 2026, allocator/swa.py's in
    August); imported here, since the load imports only what its modules import."""
    for module in mods.era.symbols.get(name, ()):
        try:
            loaded = _module(module)
        except ImportError:
            continue
        cls = None if getattr(loaded, "__kvsim_dummy__", False) else getattr(loaded, name, None)
        if cls is not None:
            return cls
    raise TargetConfigError(f"this SGLang tree has no {name} (looked in "
                            f"{', '.join(mods.era.symbols.get(name, ())) or 'no module'})")


class HybridTarget(Target):
    """SGLang's UnifiedRadixCache with HiCache, FULL + SWA or FULL + Mamba. Attributes as Target's,
    plus kind, opts, full_kv_pool (kv_pool: the FULL layers' pool the content oracle reads),
    swa_kv_pool, mamba_pool, host_pool_group and hybrid (True)."""

    hybrid = True

    def __new__(cls, mods, device, cfg, kind, opts):  # noqa: ARG003 - __init__'s arguments
        # FULL + Mamba is HiMambaRadixCache's (mamba.py), a tree of its own.
        if cls is HybridTarget and kind == "mamba":
            from kvsim.sglang_target.mamba import MambaTarget  # noqa: PLC0415
            cls = MambaTarget
        return super().__new__(cls)

    def __init__(self, mods, device, cfg, kind, opts):  # noqa: PLR0915 - one build, in order
        self.mods = mods
        self.device = device
        self.cfg = cfg
        self.kind = kind
        self.opts = opts
        self.storage = None
        self.storage_dir = None
        self.swa_kv_pool = self.mamba_pool = None
        ps = cfg.page_size
        from kvsim.sglang_target.hybrid_capabilities import swa_unsupported_reason  # noqa: PLC0415
        why = swa_unsupported_reason(mods)
        if why is not None and kind == "swa":
            raise TargetConfigError(f"cache.swa_window_tokens: {why}")
        if why is not None and "SWA stack" not in why:
            raise TargetConfigError(f"cache.mamba_device_states: {why}")
        mods.mods_server_args = mods["sglang.srt.server_args"].ServerArgs
        self.server_args = _server_args(mods, cfg)
        # SGLang's hybrid host pools are built with the KV host pool's layout; the direct layouts
        # are the assembler's business (init_hicache rewrites page_first under direct IO).
        self._configure_runtime()
        CT = era_class(mods, "ComponentType")
        self.component_types = CT
        if kind == "swa":
            swa_mod = _module(f"{MC}.swa_memory_pool")
            swa_ids = list(range(cfg.layer_count, 2 * cfg.layer_count))
            self.swa_layer_ids = swa_ids
            kv_cls = _pool_factory(mods.MHATokenToKVPool, cfg.head_dim)
            self.kv = swa_mod.SWAKVPool(
                size=cfg.device_tokens, size_swa=opts["swa_device_tokens"], page_size=ps, dtype=torch.float32,
                head_num=1, head_dim=cfg.head_dim, swa_attention_layer_ids=swa_ids,
                full_attention_layer_ids=[i for i in range(2 * cfg.layer_count) if i not in swa_ids],
                enable_kvcache_transpose=False, device="cuda", token_to_kv_pool_class=kv_cls)
            self.full_kv_pool = self.kv.full_kv_pool
            self.swa_kv_pool = self.kv.swa_kv_pool
            self.kv_pool_kind = self.full_kv_pool.kvsim_kind
            self.allocator = era_class(mods, "SWATokenToKVPoolAllocator")(
                size=cfg.device_tokens, size_swa=opts["swa_device_tokens"], page_size=ps, dtype=torch.float32,
                device="cuda", kvcache=self.kv, need_sort=False)
            self.req_to_token_pool = _req_to_token_pool(cfg)
            components = (CT.FULL, CT.SWA)
        else:
            raise TargetConfigError("cache.mamba_device_states: built by mamba.MambaTarget")
        self.kv_pool = _FullLayers(self.kv, self.full_kv_pool) if kind == "swa" else self.full_kv_pool
        group = mods.context.process_group()
        self.params = _call_with_supported(
            mods.CacheInitParams, disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=ps, tp_cache_group=group,
            eviction_policy=cfg.eviction_policy, enable_metrics=False, enable_kv_cache_events=False,
            sliding_window_size=opts["swa_window_tokens"] or None, tree_components=components)
        from kvsim.sglang_target.unified_tree import prepare_environment, tree_layout  # noqa: PLC0415
        prepare_environment(mods)
        self.cache = mods.UnifiedRadixCache(self.params)
        self.tree = tree_layout(self.cache)
        self.cache.init_hicache(self.server_args, self.params)
        self.cache.load_back_threshold = cfg.load_back_threshold_tokens
        self.controller = self.cache.cache_controller
        self.host_pool_group = self.cache.host_pool_group
        self.host_pool = self.cache.full_kv_pool_host
        self._unregister_atexit()
        self._finish_init()

    def _unregister_atexit(self):
        import atexit  # noqa: PLC0415
        for name in ("shutdown",):
            fn = getattr(self.cache, name, None)
            if fn is not None:
                atexit.unregister(fn)

    def _finish_init(self):
        import dataclasses  # noqa: PLC0415
        import inspect  # noqa: PLC0415
        from array import array  # noqa: PLC0415
        root_tokens = self.cache.root_node.key.token_ids
        self.token_type = array if isinstance(root_tokens, array) else list
        import sglang.srt.mem_cache.base_prefix_cache as bpc  # noqa: PLC0415 - the loaded era's
        self.bpc = bpc
        fields = {f.name for f in dataclasses.fields(bpc.InitLoadBackParams)}
        self.load_back_anchor = "best_match_node" if "best_match_node" in fields else "last_host_node"
        fin = inspect.signature(self.cache.cache_finished_req).parameters
        self.finish_takes_kv_len = "kv_len_to_handle" in fin
        self.common = _module(f"{MC}.common")

    # -- locks: SGLang's scheduler keeps what inc_lock_ref answered and hands it back -----------
    # Nodes go through self.tree (unified_tree.py): the August tree takes NodeIds. A subclass
    # over another tree (MambaTarget: HiMambaRadixCache) may have none: its API takes nodes.
    def _handle(self, node):
        tree = getattr(self, "tree", None)
        return node if tree is None else tree.as_handle(node)

    def lock(self, node):
        return self.cache.inc_lock_ref(self._handle(node))

    def unlock(self, node, result):
        params = _call_with_supported(
            self.bpc.DecLockRefParams, swa_uuid_for_lock=getattr(result, "swa_uuid_for_lock", None),
            skip_lock_node_ids=dict(getattr(result, "skip_lock_node_ids", None) or {}))
        self.cache.dec_lock_ref(self._handle(node), params)

    def lock_request(self, req):
        """The request's lock (PrefillAdder): its swa_uuid_for_lock (and, where the tree has them,
        the tombstones it skipped) is what cache_finished_req hands back to dec_lock_ref."""
        # The scheduler's per-request hybrid state, as a new request has it: no SWA slot freed
        # behind the window yet (kvsim's scheduler model does not free out-of-window slots).
        if not hasattr(req, "swa_evicted_seqlen"):
            req.swa_evicted_seqlen = 0
        self.tree.prepare_request(req)
        req.last_node = self.tree.as_handle(req.last_node)
        result = self.cache.inc_lock_ref(req.last_node)
        req.swa_uuid_for_lock = getattr(result, "swa_uuid_for_lock", None)
        req.skip_lock_node_ids = dict(getattr(result, "skip_lock_node_ids", None) or {})
        from kvsim.sglang_target.hybrid_checks import check_lock_covers_prefix  # noqa: PLC0415
        v = check_lock_covers_prefix(self, req)
        if v is not None:
            raise _found(v)
        return result

    def init_load_back(self, req, mem_quota=None):
        from kvsim.sglang_target.hybrid_checks import check_anchor  # noqa: PLC0415
        self.tree.prepare_request(req)
        for name in ("last_node", self.load_back_anchor):
            setattr(req, name, self.tree.as_handle(getattr(req, name)))
        v = check_anchor(self, getattr(req, self.load_back_anchor))
        if v is not None:
            raise _found(v)
        return super().init_load_back(req, mem_quota)

    def alloc_tokens(self, n):
        """n device slots (a page multiple) as SGLang's alloc_extend gives them: FULL slots, and
        for SWA the same number of SWA slots mapped from them."""
        if self.kind != "swa":
            return self.allocator.alloc(n)
        a = self.allocator
        if a.full_attn_allocator.available_size() < n or a.swa_attn_allocator.available_size() < n:
            return None
        full = a.full_attn_allocator.alloc(n)
        swa = a.swa_attn_allocator.alloc(n)
        a.set_full_to_swa_mapping(full.to(torch.int64), swa.to(torch.int64))
        return full

    def wait_side_layers(self):
        """The forward reads its SWA layers through SWAKVPool.get_key_buffer, which waits on the
        layer transfer counter: a hybrid load-back transfers the SWA layers too (the driver calls
        this with the request's load as the consumer)."""
        for layer_id in self.swa_layer_ids:
            self.kv.get_key_buffer(layer_id)

    def after_compute(self, req, start, n, hashes):
        """After the model computed positions [start, n) of req (the FULL layers written by the
        driver): the SWA layers' KV for them at the SWA slots the FULL slots map to, then, in
        decode, the scheduler's release of the request's SWA slots that left the window."""
        if self.kind != "swa" or n <= start:
            return
        row = self.req_to_token_pool.req_to_token[req.req_pool_idx]
        full = row[start:n].to(torch.int64)
        swa = self.allocator.translate_loc_from_full_to_swa(full).to(torch.int64)
        k, v = expected_swa_kv(self, hashes)
        for layer in range(self.cfg.layer_count):
            self.swa_kv_pool.k_buffer[layer][swa] = k[layer].to("cuda")
            self.swa_kv_pool.v_buffer[layer][swa] = v[layer].to("cuda")
        if start >= len(req.origin_input_ids):
            self.release_out_of_window(req, start)

    def release_out_of_window(self, req, pre_len):
        """SGLang's scheduler in decode: the SWA slots of positions both outside the tree's part
        of the request (cache_protected_len) and behind the window go back to the SWA allocator
        (free_swa, by FULL slot), page-aligned; req.swa_evicted_seqlen records how far, and
        cache_finished_req's insert tombstones the SWA of that part. Where the revision has it,
        SGLang's own common.free_swa_out_of_window_slots does this (August 2026: a window or a
        page behind); before, it lived in ScheduleBatch (not in the slice), modelled here: a
        window and a page behind."""
        ps = self.cfg.page_size
        window = self.opts["swa_window_tokens"]
        own = getattr(self.common, "free_swa_out_of_window_slots", None)
        if own is not None:
            own(req, pre_len, sliding_window_size=window, page_size=ps,
                req_to_token_pool=self.req_to_token_pool, token_to_kv_pool_allocator=self.allocator)
            return
        req.swa_evicted_seqlen = max(req.swa_evicted_seqlen, req.cache_protected_len)
        new = max(req.swa_evicted_seqlen, pre_len - window - ps) // ps * ps
        if new > req.swa_evicted_seqlen:
            row = self.req_to_token_pool.req_to_token[req.req_pool_idx]
            self.allocator.free_swa(row[req.swa_evicted_seqlen:new].to(torch.int64))
            req.swa_evicted_seqlen = new

    def budget(self):
        return int(self.allocator.available_size()) + int(self.cache.evictable_size())

    def evict(self, num_tokens):
        return self.cache.evict(_call_with_supported(self.bpc.EvictParams, num_tokens=num_tokens))


def _found(violation):
    """The driver's _Found for a violation found mid-call. Its class is the running driver's: the
    driver's module is __main__ when run with -m, and a second import of
    kvsim.sglang_target.driver would make a class its handler does not catch."""
    import sys  # noqa: PLC0415
    cls = getattr(sys.modules.get("__main__"), "_Found", None) or \
        importlib.import_module("kvsim.sglang_target.driver")._Found
    return cls(violation)


def expected_swa_kv(target, hashes):
    """(K, V) the SWA layers hold for positions with these prefix hashes: the content function's
    layers layer_count .. 2 * layer_count - 1, so an SWA byte never equals its FULL twin and a
    copy across the two pools shows."""
    from kvsim.sglang_target.content import expected_kv  # noqa: PLC0415
    lc = target.cfg.layer_count
    k, v = expected_kv(hashes, 2 * lc, 1, target.cfg.head_dim)
    return k[lc:], v[lc:]


def _pool_factory(mha_cls, head_dim):
    """A class SWAKVPool calls as token_to_kv_pool_class: each call builds one per-layer KV pool
    with kv_pool.build_kv_pool (SGLang's MHATokenToKVPool where it constructs, else the stand-in)."""

    def make(size, dtype, layer_num, page_size, **_kw):
        pool, how = build_kv_pool(mha_cls, size=size, page_size=page_size, head_dim=head_dim,
                                  layer_num=layer_num, dtype=dtype)
        pool.kvsim_kind = how
        if how != "sglang":
            # SGLang's pools answer (k bytes, v bytes); SWAKVPool sums its two pools' answers.
            k = sum(t.numel() * t.element_size() for t in pool.k_buffer)
            v = sum(t.numel() * t.element_size() for t in pool.v_buffer)
            pool.get_kv_size_bytes = lambda: (k, v)
        return pool
    return make


def _req_to_token_pool(cfg):
    """kvsim's ReqToTokenPool: int32 rows, as SGLang's (SWATokenToKVPoolAllocator.free_swa indexes
    its full-to-SWA mapping with them; the fake device takes int32 indices as torch >= 2 does)."""
    return ReqToTokenPool(cfg.max_requests, cfg.device_tokens + 2 * cfg.page_size, "cuda")


class _FullLayers:
    """The FULL layers of an SWAKVPool as the driver and the content oracle use a KV pool: the
    buffers are the inner full pool's; a waiting read goes through SWAKVPool.get_key_buffer, which
    is where SGLang's hybrid pool waits on the layer transfer counter (its inner pools do not)."""

    def __init__(self, swa_pool, full_pool):
        self.swa_pool = swa_pool
        self.k_buffer = full_pool.k_buffer
        self.v_buffer = full_pool.v_buffer
        self.full_ids = sorted(g for g, (_, is_swa) in swa_pool.layers_mapping.items() if not is_swa)

    def get_key_buffer(self, layer):
        return self.swa_pool.get_key_buffer(self.full_ids[layer])

    def get_value_buffer(self, layer):
        return self.swa_pool.get_value_buffer(self.full_ids[layer])
