"""How the hybrid target (hybrid.py) and its checks (hybrid_checks.py) reach SGLang's
UnifiedRadixCache tree, per layout of that tree. A layout is chosen by probing the built cache,
never by commit:

- NodeObjects (April - May 2026, `unified_cache_components/`): match results and the scheduler's
  req.last_node are tree nodes; the cache keeps the per-component sizes
  (`component_evictable_size_`) and `component_data` is a dict by ComponentType.
- NodeIds (August 2026, `unified_cache/` with `UnifiedTreeCore`): match results, locks,
  load-backs and req.last_node are integer NodeIds that `cache.resolve_node_handle` turns into
  nodes; the tree core keeps the sizes; `component_data` is a list indexed by ComponentType; the
  tree core backend is chosen by SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND (SGLang's default
  "python", which the environ stand-in does not know) and cache_finished_req /
  cache_unfinished_req read more of the scheduler's request (see prepare_request)."""


class NodeObjects:
    """The April - May 2026 tree: handles are nodes."""

    name = "node-objects"

    def __init__(self, cache):
        self.cache = cache

    def node(self, handle):
        return handle

    def handle(self, node):
        return node

    def as_handle(self, node_or_handle):
        """What the tree's API takes for a node or a handle (the driver hands the root node
        itself when a request skips the prefix cache)."""
        return node_or_handle

    @property
    def root_handle(self):
        return self.cache.root_node

    def sizes(self):
        """({ct: evictable tokens}, {ct: protected tokens}) as the tree keeps them."""
        return self.cache.component_evictable_size_, self.cache.component_protected_size_

    def prepare_request(self, req):
        """Nothing beyond what kvsim's Req has."""


class NodeIds(NodeObjects):
    """The August 2026 tree (UnifiedTreeCore): handles are NodeIds."""

    name = "node-ids"

    def node(self, handle):
        return self.cache.resolve_node_handle(handle)

    def handle(self, node):
        return node.id

    def as_handle(self, node_or_handle):
        return node_or_handle if isinstance(node_or_handle, int) or node_or_handle is None \
            else node_or_handle.id

    @property
    def root_handle(self):
        return self.cache.root_node.id

    def sizes(self):
        core = self.cache.tree_core
        return core.component_evictable_size_, core.component_protected_size_

    def prepare_request(self, req):
        """The scheduler's per-request fields this tree reads (schedule_batch.Req's defaults):
        the SWA / Mamba host hits a load-back is asked for, the lock's skipped tombstones, whether
        the request already released its SWA prefix lock, and no finish reason while running."""
        for name, value in (("swa_host_hit_length", 0), ("mamba_host_hit_length", 0),
                            ("skip_lock_node_ids", {}), ("swa_prefix_lock_released", False),
                            ("finished_reason", None), ("priority", 0), ("swa_evicted_seqlen", 0),
                            ("mamba_pool_idx", None)):
            if not hasattr(req, name):
                setattr(req, name, value)
        if getattr(req, "kv", None) is None:
            req.kv = RequestKv(req)


class RequestKv:
    """req.kv as the August 2026 scheduler's Req has it (its KV allocation state), over kvsim's
    Req: swa_evicted_seqlen (how far the request's SWA slots went back to the allocator, which
    cache_*_req turn into SWA tombstones) and kv_allocated_len / kv_committed_len are the
    request's own fields, so the hybrid target and SGLang's code read and write one value."""

    def __init__(self, req):
        object.__setattr__(self, "_req", req)

    def __getattr__(self, name):
        if name in ("swa_evicted_seqlen", "kv_allocated_len", "kv_committed_len"):
            return getattr(self._req, name)
        raise AttributeError(f"kvsim's request KV view has no {name}")

    def __setattr__(self, name, value):
        if name not in ("swa_evicted_seqlen", "kv_allocated_len", "kv_committed_len"):
            raise AttributeError(f"kvsim's request KV view has no {name}")
        setattr(self._req, name, value)


def tree_layout(cache):
    """The layout adapter for a built UnifiedRadixCache."""
    return NodeIds(cache) if hasattr(cache, "tree_core") and hasattr(cache, "resolve_node_handle") \
        else NodeObjects(cache)


# SGLang's environ defaults the August tree reads (its environ.py is not in the slice, and the
# environ stand-in defaults every field to None / False): the tree core registry documents
# "python" as its default backend; SGLang's environ.py of that time (the one that also declares
# SGLANG_ENABLE_UNIFIED_RADIX_TREE, which this snapshot's registry.py reads, and the "python"
# backend) declares SGLANG_OPT_UNIFIED_CACHE_FREE_OUT_OF_WINDOW_SLOTS = EnvBool(True):
# cache_unfinished_req then releases a chunked prefill's SWA slots behind the window too.
AUGUST_ENV_DEFAULTS = (("SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND", "python"),
                       ("SGLANG_OPT_UNIFIED_CACHE_FREE_OUT_OF_WINDOW_SLOTS", True))


def prepare_environment(mods):
    """Before UnifiedRadixCache is built: the August tree's environ defaults (above) where the
    loaded tree has the tree core registry; nothing for the May tree."""
    try:
        registry = mods["sglang.srt.mem_cache.unified_cache.tree_core_registry"]
    except KeyError:
        try:
            import importlib  # noqa: PLC0415
            registry = importlib.import_module("sglang.srt.mem_cache.unified_cache.tree_core_registry")
        except ImportError:
            return
    if getattr(registry, "__kvsim_dummy__", False) or not hasattr(registry, "create_tree_core"):
        return
    envs = mods["sglang.srt.environ"].envs
    for name, value in AUGUST_ENV_DEFAULTS:
        getattr(envs, name).default = value
