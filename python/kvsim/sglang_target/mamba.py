"""FULL + Mamba with HiCache for the SGLang target, as SGLang's scheduler builds it where the
revision has HiMambaRadixCache (April 2026: its UnifiedRadixCache's Mamba component has no
host transfers, so Mamba HiCache there is HiMambaRadixCache): SGLang's own HybridReqToTokenPool
(with its MambaPool), HybridLinearKVPool and TokenToKVPoolAllocator on the fake device, and the
host side (HostPoolGroup, MHATokenToKVPoolHost, MambaPoolHost, HybridCacheController) from
SGLang's assembler, HiMambaRadixCache.__init__ -> attach_hybrid_pool_to_mamba_cache. The
hierarchical cache's io_backend is the scenario's ("kernel" by default), so every pool transfer
goes through the fake transfer kernels (their index checks) and the caching-allocator
lifetime model (record_stream).

kvsim adds only what the scheduler and the model do: the request's Mamba fields, a Mamba slot
per admitted request (HybridReqToTokenPool.alloc), and the model's Mamba state write after each
compute (mamba_state_of: a function of the prefix, so a state copied to the wrong slot shows).
SGLang's MambaRadixCache v1 (no extra buffer) needs page_size 1.

Admission as SGLang sizes and admits (mamba_admission.py): the request pool has the rows SGLang's
model runner gives it (at most a third of the Mamba slots), a request is admitted only while a row
and its Mamba slots can be had (else it waits), and the row's allocation first evicts Mamba states
from the tree as SGLang's alloc_req_slots does."""

import types

import torch

from kvsim.sglang_target.hybrid import HybridTarget, _module
from kvsim.sglang_target.kv_pool import build_kv_pool
from kvsim.sglang_target.mamba_admission import (evict_for_request_slot, mamba_fork_free, mamba_states_free,
                                                 request_rows)
from kvsim.sglang_target.target import Target, TargetConfigError, _call_with_supported, _server_args

MC = "sglang.srt.mem_cache"
CONV_SHAPE = (2, 3)  # one conv state per Mamba layer and slot: [2, 3]
TEMPORAL_SHAPE = (1, 2, 2)  # the SSM state: [heads, head_dim, state]


def mamba_unsupported_reason(mods):
    """None when this revision builds FULL + Mamba with HiCache (HiMambaRadixCache and the
    assembler's attach_hybrid_pool_to_mamba_cache), else why not."""
    try:
        _module(f"{MC}.hi_mamba_radix_cache").HiMambaRadixCache  # noqa: B018
        asm = _module(f"{MC}.hybrid_cache.hybrid_pool_assembler")
    except Exception as exc:  # noqa: BLE001 - any import failure means: not buildable here
        return f"this SGLang tree's HiMambaRadixCache / hybrid_pool_assembler does not import " \
               f"({type(exc).__name__}: {str(exc)[:160]})"
    if not hasattr(asm, "attach_hybrid_pool_to_mamba_cache"):
        return "this SGLang revision's assembler has no attach_hybrid_pool_to_mamba_cache"
    mp = _module(f"{MC}.memory_pool")
    for name in ("HybridReqToTokenPool", "MambaPool", "HybridLinearKVPool"):
        if not hasattr(mp, name):
            return f"this SGLang tree's memory_pool has no {name}"
    return None


def mamba_state_of(hashes_tail, slots):
    """(conv, temporal) the model leaves in a Mamba slot after the prefix ending in this hash:
    one value per element, from the hash, so two prefixes' states differ."""
    h = int(hashes_tail) & 0xFFFFFF
    n = len(slots)
    conv = torch.full((n,) + CONV_SHAPE, float(h % 65521), dtype=torch.float32)
    temporal = torch.full((n,) + TEMPORAL_SHAPE, float(h % 65519) + 0.5, dtype=torch.float32)
    return conv, temporal


class _CacheParams:
    """SGLang's BaseLinearStateParams as MambaPool reads it (shape.conv / .temporal, dtype.*)."""

    def __init__(self):
        self.shape = types.SimpleNamespace(conv=[CONV_SHAPE], temporal=TEMPORAL_SHAPE)
        self.dtype = types.SimpleNamespace(conv=torch.float32, temporal=torch.float32)


def _driver_req_pool(base_cls, target):
    """SGLang's HybridReqToTokenPool with the two calls kvsim's driver makes of a request pool
    (alloc_row at admission, free_row); alloc_row allocates through SGLang's own alloc([req]),
    which also takes the request's Mamba slot (target.admitting is the request lock_request saw)."""

    def alloc_row(self):
        req = target.admitting
        target.admitting = None
        if req is None:
            raise RuntimeError("kvsim Mamba target: alloc_row outside an admission")
        evict_for_request_slot(target)
        got = self.alloc([req])
        if got is None:
            raise RuntimeError(f"HybridReqToTokenPool: all {self.size} request rows are in use")
        return got[0]

    def free_row(self, idx):
        self.free_slots.append(idx)

    return type("KvsimHybridReqToTokenPool", (base_cls,), {"alloc_row": alloc_row, "free_row": free_row})


class MambaTarget(HybridTarget):
    """HiMambaRadixCache with HiCache. Attributes as HybridTarget's, plus mamba_pool (SGLang's
    MambaPool), mamba_host_pool and mamba_tree (True: the tree is HiMambaRadixCache's)."""

    mamba_tree = True

    def __init__(self, mods, device, cfg, kind, opts):  # noqa: PLR0913 - HybridTarget's signature
        self.mods, self.device, self.cfg, self.kind, self.opts = mods, device, cfg, kind, opts
        self.storage = self.storage_dir = None
        self.swa_kv_pool = None
        self.admitting = None
        why = mamba_unsupported_reason(mods)
        if why is not None:
            raise TargetConfigError(f"cache.mamba_device_states: {why}")
        if cfg.page_size != 1:
            raise TargetConfigError("cache.page_size: SGLang's MambaRadixCache (no Mamba extra buffer) "
                                    f"needs page_size 1, not {cfg.page_size}")
        mods.mods_server_args = mods["sglang.srt.server_args"].ServerArgs
        self.server_args = _server_args(mods, cfg)
        # The model's config as ServerArgs caches it (get_model_config; August 2026 on,
        # mamba_cache_chunk_size reads hf_config.mamba_chunk_size, absent here: SGLang's default).
        self.server_args.model_config = types.SimpleNamespace(
            hf_config=types.SimpleNamespace(architectures=["KvsimFakeHybridMamba"]), is_hybrid_swa=False)
        # The scheduler publishes its ServerArgs; MambaRadixCache's match reads them back.
        sa_mod = mods["sglang.srt.server_args"]
        if hasattr(sa_mod, "set_global_server_args_for_scheduler"):
            sa_mod.set_global_server_args_for_scheduler(self.server_args)
        self._configure_runtime()
        mp = _module(f"{MC}.memory_pool")
        lc = cfg.layer_count
        # Layers 0 .. lc-1 full attention, lc .. 2lc-1 Mamba (a hybrid model's two kinds).
        full_ids, mamba_ids = list(range(lc)), list(range(lc, 2 * lc))
        self.mamba_layer_ids = mamba_ids
        pool_cls = _driver_req_pool(mp.HybridReqToTokenPool, self)
        self.req_to_token_pool = pool_cls(
            size=request_rows(cfg.max_requests, opts["mamba_device_states"]),
            mamba_size=opts["mamba_device_states"], mamba_spec_state_size=0,
            max_context_len=cfg.device_tokens + 2, device="cuda", enable_memory_saver=False,
            cache_params=_CacheParams(), mamba_layer_ids=mamba_ids, enable_mamba_extra_buffer=False,
            enable_overlap_schedule=False)
        self.mamba_pool = self.req_to_token_pool.mamba_pool
        self.kv, self.kv_pool_kind = _hybrid_linear_kv_pool(mp, mods, cfg, full_ids, self.mamba_pool)
        self.full_kv_pool = self.kv.full_kv_pool
        # The model reads FULL layers through the hybrid pool, which waits on the layer
        # transfer counter (the assembler registers it there, not on the inner pool).
        self.kv_pool = _FullLayersOf(self.kv, self.full_kv_pool, full_ids)
        self.allocator = _call_with_supported(
            mods.TokenToKVPoolAllocator or mods.PagedTokenToKVPoolAllocator, size=cfg.device_tokens,
            page_size=1, dtype=torch.float32, device="cuda", kvcache=self.kv, need_sort=False)
        group = mods.context.process_group()
        self.params = _call_with_supported(
            mods.CacheInitParams, disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=1, tp_cache_group=group,
            eviction_policy=cfg.eviction_policy, enable_metrics=False, enable_kv_cache_events=False,
            enable_mamba_extra_buffer=False)
        hmc = _module(f"{MC}.hi_mamba_radix_cache")
        self.cache = hmc.HiMambaRadixCache(self.params, self.server_args)
        # HybridTarget's lock / unlock / request preparation go through a tree layout
        # (unified_tree.py); HiMambaRadixCache's API takes its nodes themselves.
        from kvsim.sglang_target.unified_tree import NodeObjects  # noqa: PLC0415
        self.tree = NodeObjects(self.cache)
        self.cache.load_back_threshold = cfg.load_back_threshold_tokens
        self.controller = self.cache.cache_controller
        self.host_pool_group = self.cache.host_pool_group
        self.host_pool = self.cache.full_kv_pool_host
        self.mamba_host_pool = self.cache.mamba_pool_host
        self.component_types = None
        self._unregister_atexit()
        self._finish_init()

    # -- locks: HiMambaRadixCache's inc/dec_lock_ref ---------------------------------------------
    def unlock(self, node, _result):
        self.cache.dec_lock_ref(node)

    def lock_request(self, req):
        """The scheduler's admission lock, and the request's Mamba fields as a new SGLang Req has
        them (a load-back may have set mamba_pool_idx already)."""
        for name, value in (("mamba_pool_idx", None), ("mamba_ping_pong_track_buffer", None),
                            ("mamba_next_track_idx", 0), ("mamba_last_track_seqlen", None),
                            ("mamba_branching_seqlen", None)):
            if not hasattr(req, name):
                setattr(req, name, value)
        self.admitting = req
        return self.cache.inc_lock_ref(req.last_node)

    def can_admit(self, req):
        """Whether the request's Mamba slots can be had now (the driver's admission asks before it
        takes anything; a request that cannot be admitted waits)."""
        return mamba_states_free(self, req)

    def can_compute(self, req, n):  # noqa: ARG002 - the driver's hook signature
        """Whether a compute can run now: one that ends in cache_unfinished_req (a prefill step)
        forks the request's Mamba state and needs a slot."""
        if req.computed >= len(req.origin_input_ids):
            return True
        return mamba_fork_free(self)

    def init_load_back(self, req, mem_quota=None):
        for name in ("mamba_pool_idx", "mamba_ping_pong_track_buffer"):
            if not hasattr(req, name):
                setattr(req, name, None)
        return Target.init_load_back(self, req, mem_quota)

    def wait_side_layers(self):
        """The forward's Mamba layers read their state through SGLang's mamba2_layer_cache, which
        waits on the layer transfer counter: a hybrid load-back transfers every layer (KV and
        Mamba), so the batch's forward waits on the Mamba layers' load events too (the driver
        calls this with the request's load as the consumer)."""
        for layer_id in self.mamba_layer_ids:
            self.req_to_token_pool.mamba2_layer_cache(layer_id)

    def alloc_tokens(self, n):
        return self.allocator.alloc(n)

    def after_compute(self, req, start, n, hashes):
        """The model's Mamba state after positions [start, n): one state per request, in its
        slot (SGLang's mamba_pool_idx)."""
        if n <= start or req.mamba_pool_idx is None:
            return
        slot = req.mamba_pool_idx.reshape(1).to(torch.int64)
        conv, temporal = mamba_state_of(hashes[-1], slot)
        cache = self.mamba_pool.mamba_cache
        for layer in range(cache.temporal.shape[0]):
            cache.conv[0][layer][slot] = conv.to("cuda")
            cache.temporal[layer][slot] = temporal.to("cuda")

    def budget(self):
        return int(self.allocator.available_size()) + int(self.cache.full_evictable_size())

    def evict(self, num_tokens):
        return self.cache.evict(_call_with_supported(self.bpc.EvictParams, num_tokens=num_tokens))


def _hybrid_linear_kv_pool(mp, mods, cfg, full_ids, mamba_pool):
    """(pool, how): SGLang's HybridLinearKVPool; its inner MHATokenToKVPool is kv_pool's (SGLang's
    own where it constructs on the fake device, else the stand-in), swapped in before
    construction so the hybrid pool holds it."""
    inner, how = build_kv_pool(mods.MHATokenToKVPool, size=cfg.device_tokens, page_size=1,
                               head_dim=cfg.head_dim, layer_num=len(full_ids))
    if how != "sglang":
        # SGLang's MHA pools answer (k bytes, v bytes); HybridLinearKVPool unpacks it (August on).
        k = sum(t.numel() * t.element_size() for t in inner.k_buffer)
        v = sum(t.numel() * t.element_size() for t in inner.v_buffer)
        inner.get_kv_size_bytes = lambda: (k, v)
    saved = mp.MHATokenToKVPool
    mp.MHATokenToKVPool = lambda **_kw: inner
    try:
        # August 2026 on, the pool takes the inner pool as full_kv_pool (and no longer the
        # transpose flag); earlier ones build it from MHATokenToKVPool, swapped above.
        pool = _call_with_supported(
            mp.HybridLinearKVPool, size=cfg.device_tokens, dtype=torch.float32, page_size=1, head_num=1,
            head_dim=cfg.head_dim, full_attention_layer_ids=full_ids, enable_kvcache_transpose=False,
            device="cuda", mamba_pool=mamba_pool, full_kv_pool=inner)
    finally:
        mp.MHATokenToKVPool = saved
    return pool, f"HybridLinearKVPool over {how}"


class _FullLayersOf:
    """The FULL layers of a HybridLinearKVPool as the driver and the content oracle use a KV
    pool: buffers are the inner pool's; a waiting read goes through the hybrid pool's
    get_key_buffer / get_value_buffer (by global layer id)."""

    def __init__(self, hybrid_pool, full_pool, full_ids):
        self.hybrid_pool = hybrid_pool
        self.k_buffer = full_pool.k_buffer
        self.v_buffer = full_pool.v_buffer
        self.full_ids = list(full_ids)

    def get_key_buffer(self, layer):
        return self.hybrid_pool.get_key_buffer(self.full_ids[layer])

    def get_value_buffer(self, layer):
        return self.hybrid_pool.get_value_buffer(self.full_ids[layer])
