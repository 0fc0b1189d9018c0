"""The driver's storage-tier calls (docs/sglang-target-protocol.md): `arrive` (SGLang's
scheduler's prefetch on arrival), `prefetch_check`, `storage` (one stepped unit of a storage
worker, with kvsim's storage fault armed on the memory backend for that step), and what the other
calls need of the tier: the host-allocation log behind the prefetch liveness check, the state
the scheduler model reads (`storage_reads`, `storage_pending`), draining the tier at `flush`."""

import sys
from array import array

from kvsim.sglang_target.memory_storage import FAULTS


class HostAllocLog:
    """Wraps the host pool's `alloc` (an instance attribute, so SGLang's own calls go through it)
    and logs each call of the current driver call: (rid of the prefetch it serves or None,
    tokens asked, host tokens available before, tokens given). The rid is the `req_id` local of
    the nearest SGLang frame that has one (prefetch code names the request so at every era)."""

    def __init__(self, host_pool):
        self.entries = []
        self.pool = host_pool
        original = host_pool.alloc

        def alloc(need_size, *args, **kwargs):
            available = int(type(host_pool).available_size(host_pool))  # the pool's own count
            result = original(need_size, *args, **kwargs)
            self.entries.append((_caller_rid(), int(need_size), available,
                                 0 if result is None else len(result)))
            return result
        host_pool.alloc = alloc

    def take(self):
        out, self.entries = self.entries, []
        return out


def _caller_rid():
    frame = sys._getframe(2)
    while frame is not None:
        rid = frame.f_locals.get("req_id")
        if isinstance(rid, str) and rid != "__storage_hit_query__":
            return rid
        frame = frame.f_back
    return None


class StorageCalls:
    """Mixed into Driver: needs self.target, self.reqs, self.prefetching (rid -> arrival)."""

    def _storage_setup(self):
        t = self.target
        self.prefetching = {}  # rid -> tokens, for the rids whose prefetch SGLang may still run
        self.host_allocs = HostAllocLog(t.host_pool) if t.storage is not None else None

    def _tokens_for(self, tokens):
        return array("q", tokens) if self.target.token_type is array else list(tokens)

    def _call_arrive(self, request):
        """SGLang's scheduler on a new request with the storage tier on (_prefetch_kvcache):
        match the prompt; when the device anchor is backed up, prefetch what is past the device
        and host hits, chained from the host anchor's last page hash."""
        from kvsim.sglang_target.checks import extra_key_of_ns  # noqa: PLC0415
        t = self.target
        rid = str(request.get("rid"))
        tokens = [int(x) for x in request.get("tokens") or []]
        if rid in self.reqs:
            raise self.DriverError(f"arrive of {rid}: it is already admitted")
        if t.storage is None or not t.cfg.prefetch or not tokens:
            return {"prefetching": False}
        cache = t.cache
        ns = int(request.get("ns", 0))
        m = t.match_prefix(t.radix_key(tokens[: len(tokens) - 1], extra_key_of_ns(ns)))
        if not m.last_device_node.backuped:
            return {"prefetching": False}
        matched = len(m.device_indices) + int(getattr(m, "host_hit_length", 0) or 0)
        host_anchor = m.last_host_node
        prefix_keys = host_anchor.get_prefix_hash_values(host_anchor.parent) \
            if getattr(cache, "hicache_storage_pass_prefix_keys", False) else None
        cache.prefetch_from_storage(rid, host_anchor, self._tokens_for(tokens[matched:]),
                                    host_anchor.get_last_hash_value(), prefix_keys)
        live = rid in cache.ongoing_prefetch
        if live or any(e[0] == rid for e in self.host_allocs.entries):
            self.prefetching[rid] = tokens
        return {"prefetching": live}

    def _call_prefetch_check(self, request):
        """SGLang's scheduler before admitting a waiting request: check_prefetch_progress; when
        done, the tokens the prefetch brought (pop_prefetch_loaded_tokens)."""
        t = self.target
        rid = str(request.get("rid"))
        if t.storage is None:
            return {"done": True, "loaded": 0, "decisions": {"prefetch_loaded": 0}}
        done = bool(t.cache.check_prefetch_progress(rid))
        loaded = 0
        if done:
            loaded = int(t.cache.pop_prefetch_loaded_tokens(rid))
            self.prefetching.pop(rid, None)
        return {"done": done, "loaded": loaded, "decisions": {"prefetch_loaded": loaded}}

    def _call_storage(self, request):
        t = self.target
        worker = int(request.get("worker", -1))
        fault = request.get("fault") or None
        if fault is not None and fault not in FAULTS:
            raise self.DriverError(f"storage fault {fault!r} is not one of {', '.join(FAULTS)}")
        if worker not in (0, 1, 2):
            raise self.DriverError(f"storage worker {worker} is not 0 (query), 1 (io) or 2 (backup)")
        if t.storage is None:
            return {"did": False, "fault_applied": False}
        if fault == "slow_io":
            return {"did": False, "fault_applied": True}  # the step makes no progress
        backend = t.storage_backend
        armable = hasattr(backend, "arm")
        if armable:
            backend.arm(fault)
            before = len(backend.applied)
        try:
            did = t.storage.step(worker)
        finally:
            if armable:
                backend.arm(None)
        applied = armable and fault is not None and len(backend.applied) > before
        return {"did": bool(did), "fault_applied": bool(applied)}

    def _drain_storage(self):
        """Steps every storage worker and consumes its acks until the tier is idle (flush with
        `storage: true`)."""
        t = self.target
        for _ in range(64):
            did = False
            for worker in (0, 1, 2):
                while t.storage.step(worker):
                    did = True
            t.cache.check_hicache_events()
            if not did and not any(t.storage.pending()):
                return
        raise RuntimeError("the storage tier did not drain in 64 rounds")

    def _storage_state(self):
        t = self.target
        if t.storage is None:
            return False, {"query": 0, "io": 0, "backup": 0}
        q, io, backup = t.storage.pending()
        ps = t.cfg.page_size
        # A live prefetch not terminated whose pages are not all read (host memory not yet
        # given, hit query pending, or reads left).
        reads = io > 0 or q > 0 or any(
            not op.is_terminated() and (op.host_indices is None or op.completed_tokens < len(op.hash_value) * ps)
            for op in (info[-1] for info in t.cache.ongoing_prefetch.values()))
        return reads, {"query": q, "io": io, "backup": backup}
