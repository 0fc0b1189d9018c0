"""Builds SGLang's own cache from a kvsim scenario's `cache` section, on kvsim's fake device:
the device KV pool (SGLang's MHATokenToKVPool), the paged allocator, the host pool (inside
HiRadixCache, with the scenario's host layout), HiCacheController and HiRadixCache (or RadixCache
when `hierarchical` is false). Constructor differences between eras are found by probing
signatures and dataclass fields, never by commit."""

import dataclasses
import inspect
import json
import os
from array import array

import torch

from kvsim.sglang_target.kv_pool import build_kv_pool
from kvsim.sglang_target.requests import ReqToTokenPool


class TargetConfigError(Exception):
    """The scenario asks for something the SGLang target cannot build; names the field."""


# kvsim's scenario fields the SGLang target does not model yet (value must be the default).
_UNSUPPORTED_NONZERO = ("swa_window_tokens", "mamba_device_states")
HOST_LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_head")
WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
PREFETCH_STOP_POLICIES = ("best_effort", "wait_complete", "timeout")


@dataclasses.dataclass
class CacheConfig:
    page_size: int = 4
    hierarchical: bool = True
    layer_count: int = 2
    item_bytes: int = 16
    device_tokens: int = 1024
    host_tokens: int = 2048
    host_layout: str = "page_first"
    write_policy: str = "write_through"
    eviction_policy: str = "lru"
    load_back_threshold_tokens: int = 8
    storage: object = False
    prefetch_threshold_tokens: int = 256
    prefetch_stop_policy: str = "timeout"
    prefetch_timeout_base_ticks: int = 2000
    prefetch_timeout_per_ki_token_ticks: int = 100
    prefetch_timeout_max_ticks: int = 30000
    io_backend: str = "kernel"
    max_requests: int = 64
    prefetch: bool = True  # scheduler.prefetch: prefetch from storage on arrival
    pd: bool = False  # scheduler.mode "pd": a decode instance (retract.py)
    metadata_slots: int = 16  # scheduler.metadata_slots: SGLang's MetadataBuffers size
    cpu_copy_chunk_tokens: int = 8192  # scheduler.cpu_copy_chunk_tokens: get_cpu_copy's chunk
    sparse_index_bytes_per_page: int = 0  # > 0: SGLang's NSA pool with its index-with-scale buffer

    @classmethod
    def from_scenario(cls, scenario):
        cache = dict((scenario or {}).get("cache") or {})
        sched = (scenario or {}).get("scheduler") or {}
        for name in _UNSUPPORTED_NONZERO:
            if cache.get(name, 0):
                raise TargetConfigError(f"cache.{name}: hybrid components are not supported by the SGLang "
                                        "target yet (HiRadixCache full attention only)")
        known = {f.name for f in dataclasses.fields(cls)}
        cfg = cls(**{k: v for k, v in cache.items() if k in known})
        if "max_running" in sched:
            cfg.max_requests = max(int(sched["max_running"]) * 2 + 8, 16)
        cfg.prefetch = bool(sched.get("prefetch", True))
        cfg.pd = sched.get("mode") == "pd"
        cfg.metadata_slots = int(sched.get("metadata_slots", cfg.metadata_slots))
        cfg.cpu_copy_chunk_tokens = int(sched.get("cpu_copy_chunk_tokens", cfg.cpu_copy_chunk_tokens))
        cfg.validate()
        return cfg

    def validate(self):
        ps = self.page_size
        if not isinstance(ps, int) or ps < 1:
            raise TargetConfigError(f"cache.page_size: must be a positive integer, got {ps!r}")
        for name in ("device_tokens", "host_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < ps or v % ps:
                raise TargetConfigError(f"cache.{name}: must be a positive multiple of page_size {ps}, got {v!r}")
        if self.host_layout not in HOST_LAYOUTS:
            raise TargetConfigError(f"cache.host_layout: {self.host_layout!r} is not one of {HOST_LAYOUTS}")
        if self.write_policy not in WRITE_POLICIES:
            raise TargetConfigError(f"cache.write_policy: {self.write_policy!r} is not one of {WRITE_POLICIES}")
        if self.eviction_policy not in ("lru", "lfu"):
            raise TargetConfigError(f"cache.eviction_policy: {self.eviction_policy!r} is not lru or lfu")
        if self.item_bytes < 8 or self.item_bytes % 8:
            raise TargetConfigError(f"cache.item_bytes: must be a multiple of 8, got {self.item_bytes}")
        self.storage_options()  # validates
        if self.metadata_slots < 1 or self.cpu_copy_chunk_tokens < 1:
            raise TargetConfigError("scheduler.metadata_slots and scheduler.cpu_copy_chunk_tokens: must be >= 1")
        if self.sparse_index_bytes_per_page:
            from kvsim.sglang_target.retract_pool import NSA_PAGE_SIZE  # noqa: PLC0415
            if not self.pd:
                raise TargetConfigError("cache.sparse_index_bytes_per_page: needs scheduler.mode 'pd'")
            if self.page_size != NSA_PAGE_SIZE:
                raise TargetConfigError(f"cache.sparse_index_bytes_per_page: SGLang's NSA pool needs "
                                        f"cache.page_size {NSA_PAGE_SIZE}, got {self.page_size}")
            if self.hierarchical:
                raise TargetConfigError("cache.sparse_index_bytes_per_page: the SGLang target runs the NSA "
                                        "pool under RadixCache only (cache.hierarchical false); HiRadixCache "
                                        "over it is SGLang's hybrid NSA path, not modelled yet")
        if self.prefetch_stop_policy not in PREFETCH_STOP_POLICIES:
            raise TargetConfigError(f"cache.prefetch_stop_policy: {self.prefetch_stop_policy!r} is not one of "
                                    f"{PREFETCH_STOP_POLICIES}")
        if self.storage_options() is not None and not self.hierarchical:
            raise TargetConfigError("cache.storage: the storage tier needs cache.hierarchical true")

    def storage_options(self):
        """None (no storage tier) or {backend: 'memory'|'file', dir, capacity_bytes}."""
        s = self.storage
        if s in (False, None):
            return None
        if s is True:
            s = {}
        if not isinstance(s, dict):
            raise TargetConfigError(f"cache.storage: true, false or an object, got {s!r}")
        if not s.get("enabled", True):
            return None
        backend = s.get("backend", "memory")
        if backend not in ("memory", "file"):
            raise TargetConfigError(f"cache.storage.backend: {backend!r} is not 'memory' or 'file'")
        if s.get("reuse"):
            raise TargetConfigError("cache.storage.reuse: the SGLang target always starts on an empty store")
        cap = s.get("capacity_bytes", 0)
        if not isinstance(cap, int) or cap < 0:
            raise TargetConfigError(f"cache.storage.capacity_bytes: a non-negative integer, got {cap!r}")
        if cap and backend == "file":
            raise TargetConfigError("cache.storage.capacity_bytes: the SGLang target's file backend "
                                    "(SGLang's HiCacheFile) takes no byte budget; use backend 'memory'")
        d = s.get("dir", "") or ""
        if d and not os.path.isdir(d):
            raise TargetConfigError(f"cache.storage.dir: {d!r} is not an existing directory")
        return {"backend": backend, "dir": d, "capacity_bytes": cap}

    @property
    def head_dim(self):
        # One head; K and V of one token in one layer are item_bytes each, in float32. (Half of
        # item_bytes each made 4-byte items at item_bytes 8, which SGLang's transfer kernels
        # refuse: a harness false alarm, `kernel_input`, at the first hunt unit.)
        return self.item_bytes // 4


def storage_extra_config(cfg):
    """SGLang's hicache_storage_backend_extra_config for the scenario: the prefetch threshold and
    timeouts (ticks are logical milliseconds; SGLang's are seconds of time.monotonic(), which the
    loader points at the logical clock) and, for the memory backend, the dynamic factory's class."""
    opts = cfg.storage_options()
    extra = {"prefetch_threshold": int(cfg.prefetch_threshold_tokens),
             "prefetch_timeout_base": cfg.prefetch_timeout_base_ticks / 1000.0,
             "prefetch_timeout_per_ki_token": cfg.prefetch_timeout_per_ki_token_ticks / 1000.0,
             "prefetch_timeout_max": cfg.prefetch_timeout_max_ticks / 1000.0}
    if opts["backend"] == "memory":
        extra.update(backend_name="kvsim_memory", module_path="kvsim.sglang_target.memory_storage",
                     class_name="KvsimMemoryStorage", kvsim_capacity_bytes=opts["capacity_bytes"])
    return extra


def _server_args(mods, cfg):
    """SGLang's own ServerArgs with every field at its declared default (no __post_init__, which
    would resolve a model), then the HiCache fields the scenario decides."""
    cls = mods.mods_server_args
    args = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
        else:
            value = None
        object.__setattr__(args, f.name, value)
    host_after = max(cfg.host_tokens - cfg.page_size, 0)
    # HostKVCache sizes itself int(device_size * ratio) // page + 1 pages: this ratio gives
    # exactly host_tokens.
    ratio = (host_after + 0.5) / cfg.device_tokens
    values = dict(hicache_ratio=ratio, hicache_size=0, hicache_mem_layout=cfg.host_layout,
                  hicache_write_policy=cfg.write_policy, hicache_io_backend=cfg.io_backend,
                  hicache_storage_backend=None, hicache_storage_backend_extra_config=None,
                  hicache_storage_prefetch_policy="best_effort", served_model_name="kvsim",
                  model_path="kvsim", page_size=cfg.page_size, enable_hierarchical_cache=cfg.hierarchical,
                  radix_eviction_policy=cfg.eviction_policy, extra_metric_labels=None)
    if cfg.host_layout == "page_first_direct":
        values["hicache_io_backend"] = "direct"
    opts = cfg.storage_options()
    if opts is not None:
        values["hicache_storage_backend"] = "dynamic" if opts["backend"] == "memory" else "file"
        values["hicache_storage_backend_extra_config"] = json.dumps(storage_extra_config(cfg), sort_keys=True)
        values["hicache_storage_prefetch_policy"] = cfg.prefetch_stop_policy
    for k, v in values.items():
        object.__setattr__(args, k, v)
    return args


def _call_with_supported(fn, **kwargs):
    """Calls fn with the keyword arguments its signature takes (the rest are era-specific)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**kwargs)
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def _node_hash(node):
    node_id = node.__dict__.get("id")
    return object.__hash__(node) if node_id is None else hash(node_id)


def _hash_tree_nodes_by_id(mods):
    """SGLang keeps tree nodes in sets (evictable_leaves, evictable_host_leaves, ...) and evicts
    in the order `list(set)` gives among equal priorities, which the logical clock makes
    common. A node hashes by its address (object.__hash__), so that order, and with it which
    node is evicted, changed with the process's memory layout (ASLR, what was freed before): two
    runs of one op stream could evict differently. A node hashes by its id here (SGLang's
    per-class counter, the same in a fresh driver and a forked one), so the order is a function
    of the op stream; it stays one of the orders SGLang can meet."""
    for name, module in sorted(getattr(mods, "modules", {}).items()):
        if not name.startswith("sglang.srt.mem_cache") or module is None:
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__name__.endswith("TreeNode") and cls.__hash__ is object.__hash__:
                cls.__hash__ = _node_hash


class Target:
    """SGLang's cache built for one scenario. Attributes: mods, device, cfg, kv_pool, allocator,
    req_to_token_pool, cache, controller (None without a host tier), host_pool."""

    def __init__(self, mods, device, cfg):
        self.mods = mods
        self.device = device
        self.cfg = cfg
        ps = cfg.page_size
        _hash_tree_nodes_by_id(mods)
        mods.mods_server_args = mods["sglang.srt.server_args"].ServerArgs
        self.server_args = _server_args(mods, cfg)
        self._configure_runtime()
        self.kv_pool = self._build_kv_pool()
        alloc_cls = mods.PagedTokenToKVPoolAllocator if ps > 1 else (
            mods.TokenToKVPoolAllocator or mods.PagedTokenToKVPoolAllocator)
        if ps == 1 and alloc_cls is mods.TokenToKVPoolAllocator:
            self.allocator = _call_with_supported(alloc_cls, size=cfg.device_tokens, page_size=1,
                                                  dtype=torch.float32, device="cuda",
                                                  kvcache=self.kv_pool, need_sort=False)
        else:
            self.allocator = _call_with_supported(alloc_cls, size=cfg.device_tokens, page_size=ps,
                                                  dtype=torch.float32, device="cuda",
                                                  kvcache=self.kv_pool, need_sort=False)
        self.req_to_token_pool = ReqToTokenPool(cfg.max_requests, cfg.device_tokens + 2 * ps, "cuda")
        group = mods.context.process_group()
        params = _call_with_supported(
            mods.CacheInitParams, disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=ps, tp_cache_group=group,
            eviction_policy=cfg.eviction_policy, enable_metrics=False, enable_kv_cache_events=False)
        self.storage = None  # StorageStepper when the storage tier is on
        self.storage_dir = None  # the file backend's directory when the driver made it
        if cfg.hierarchical:
            self._prepare_storage()
            self.cache = mods.HiRadixCache(params, self.server_args)
            self.cache.load_back_threshold = cfg.load_back_threshold_tokens
            self.controller = self.cache.cache_controller
            self.host_pool = self.cache.token_to_kv_pool_host
            self._unregister_atexit()
            if cfg.storage_options() is not None:
                from kvsim.sglang_target.storage_steps import StorageStepper  # noqa: PLC0415
                if not getattr(self.controller, "enable_storage", False):
                    raise TargetConfigError("cache.storage: SGLang's HiCacheController did not enable storage")
                self.storage = StorageStepper(self.controller)
        else:
            self.cache = mods.RadixCache(params)
            self.controller = None
            self.host_pool = None
        root_tokens = self.cache.root_node.key.token_ids
        self.token_type = array if isinstance(root_tokens, array) else list
        import sglang.srt.mem_cache.base_prefix_cache as bpc  # noqa: PLC0415 - the loaded era's
        self.bpc = bpc
        fields = {f.name for f in dataclasses.fields(bpc.InitLoadBackParams)} \
            if hasattr(bpc, "InitLoadBackParams") else set()
        self.load_back_anchor = "best_match_node" if "best_match_node" in fields else "last_host_node"
        fin = inspect.signature(self.cache.cache_finished_req).parameters
        self.finish_takes_kv_len = "kv_len_to_handle" in fin
        try:
            self.common = mods["sglang.srt.mem_cache.common"]
        except KeyError:
            self.common = None
        if self.common is None or not hasattr(self.common, "evict_from_tree_cache"):
            import importlib  # noqa: PLC0415
            self.common = importlib.import_module("sglang.srt.mem_cache.common")

    def _prepare_storage(self):
        """Before HiRadixCache is built: the controller's storage threads become stepped workers,
        and the file backend gets its directory (a temporary one the driver removes, unless the
        scenario names one)."""
        opts = self.cfg.storage_options()
        if opts is None:
            return
        from kvsim.sglang_target import storage_steps  # noqa: PLC0415
        storage_steps.install(self.mods["sglang.srt.managers.cache_controller"])
        if opts["backend"] == "file":
            import tempfile  # noqa: PLC0415
            path = opts["dir"]
            if not path:
                path = self.storage_dir = tempfile.mkdtemp(prefix="kvsim-sglang-hicache-")
            envs = self.mods["sglang.srt.environ"].envs
            envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.default = path

    def close(self):
        if self.storage_dir is not None:
            import shutil  # noqa: PLC0415
            shutil.rmtree(self.storage_dir, ignore_errors=True)
            self.storage_dir = None

    @property
    def storage_backend(self):
        return None if self.storage is None else self.controller.storage_backend

    def _configure_runtime(self):
        try:
            ctx = self.mods["sglang.srt.runtime_context"]
        except KeyError:
            return
        if hasattr(ctx, "configure"):
            ctx.configure(schedule={"page_size": self.cfg.page_size},
                          server_args=self.server_args.__dict__ if False else {})

    def _build_kv_pool(self):
        cfg = self.cfg
        if cfg.sparse_index_bytes_per_page:
            from kvsim.sglang_target.retract_pool import build_nsa_pool, nsa_class  # noqa: PLC0415
            cls = nsa_class(self.mods["sglang.srt.mem_cache.memory_pool"])
            if cls is None:
                raise TargetConfigError("cache.sparse_index_bytes_per_page: this SGLang tree's memory_pool "
                                        "has no NSATokenToKVPool / DSATokenToKVPool")
            pool, how = build_nsa_pool(cls, size=cfg.device_tokens, page_size=cfg.page_size,
                                       head_dim=cfg.head_dim, layer_num=cfg.layer_count)
            self.kv_pool_kind = f"{cls.__name__}: {how}"
            return pool
        cls = self.mods.MHATokenToKVPool
        if cls is None:
            raise TargetConfigError("this SGLang tree's memory_pool.MHATokenToKVPool did not load "
                                    f"({self.mods.optional_errors.get('sglang.srt.mem_cache.memory_pool')})")
        pool, self.kv_pool_kind = build_kv_pool(cls, size=cfg.device_tokens, page_size=cfg.page_size,
                                                head_dim=cfg.head_dim, layer_num=cfg.layer_count)
        return pool

    def _unregister_atexit(self):
        import atexit  # noqa: PLC0415
        atexit.unregister(self.cache.shutdown)

    # -- era-neutral calls ---------------------------------------------------------------------
    def match_prefix(self, key):
        bpc = self.bpc
        if hasattr(bpc, "MatchPrefixParams"):
            return self.cache.match_prefix(bpc.MatchPrefixParams(key=key))
        return self.cache.match_prefix(key=key)

    def radix_key(self, tokens, extra_key):
        rc = self.mods["sglang.srt.mem_cache.radix_cache"]
        return rc.RadixKey(token_ids=self.token_type(tokens) if self.token_type is list
                           else array("q", tokens), extra_key=extra_key)

    def init_load_back(self, req, mem_quota=None):
        kwargs = {self.load_back_anchor: getattr(req, self.load_back_anchor),
                  "host_hit_length": req.host_hit_length, "mem_quota": mem_quota, "req": req}
        params = _call_with_supported(self.bpc.InitLoadBackParams, **kwargs)
        return self.cache.init_load_back(params)

    def evict(self, num_tokens):
        if hasattr(self.bpc, "EvictParams"):
            return self.cache.evict(self.bpc.EvictParams(num_tokens=num_tokens))
        return self.cache.evict(num_tokens)

    # Locks as SGLang's scheduler takes them (the hybrid target hands results back: hybrid.py).
    def lock(self, node):
        return self.cache.inc_lock_ref(node)

    def unlock(self, node, _result):
        self.cache.dec_lock_ref(node)

    def lock_request(self, req):
        return self.cache.inc_lock_ref(req.last_node)

    def alloc_tokens(self, n):
        return self.allocator.alloc(n)

    def evict_for(self, num_tokens):
        """What SGLang's scheduler does before an allocation of num_tokens (its own helper)."""
        self.common.evict_from_tree_cache(self.cache, num_tokens)

    def cache_finished_req(self, req, is_insert=True):
        if self.finish_takes_kv_len:
            self.cache.cache_finished_req(req, is_insert=is_insert, kv_len_to_handle=req.kv_committed_len)
        else:
            self.cache.cache_finished_req(req, is_insert=is_insert)

    def budget(self):
        return int(self.allocator.available_size()) + int(self.cache.evictable_size())

    @property
    def streams(self):
        dev = self.device
        out = {"compute": dev.default_stream.index}
        if self.controller is not None:
            out["write"] = self.controller.write_stream.index
            out["load"] = self.controller.load_stream.index
        return out
