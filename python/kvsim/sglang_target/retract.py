"""PD decode's retract and resume through SGLang's own code (the driver's `offload` and `resume`
calls, docs/sglang-target-protocol.md), and the metadata and sparse-index hooks the driver's
admit / compute / abort / checks call.

offload (SGLang's retract_decode on a decode instance): the request's KV goes to CPU through
the allocator's (else the device pool's) `get_cpu_copy` of its slots — SGLang's
Req.offload_kv_cache — then `release_kv_cache(req, tree_cache, is_insert=False)` frees them.
resume: new slots for the same positions (evicting first, as SGLang's alloc does), the request
row rewritten, `load_cpu_copy` — Req.load_kv_cache — and then the resumed request's KV (the
simulator reads it: verify_resumed), sparse index and metadata are checked."""

import sys

import torch


class _Offloaded:
    __slots__ = ("req", "hashes", "cpu", "n")

    def __init__(self, req, hashes, cpu, n):
        self.req, self.hashes, self.cpu, self.n = req, hashes, cpu, n


class RetractCalls:
    """Mixed into the Driver: uses its target, mods, reqs, hashes, _req and _release."""

    # ---- hooks the driver calls ---------------------------------------------------------------
    def _pd_setup(self):
        """At hello: SGLang's MetadataBuffers for PD decode, and the scenario's CPU-copy chunk on
        the device pool (SGLang's cpu_offloading_chunk_size)."""
        from kvsim.sglang_target.metadata import PdMetadata  # noqa: PLC0415
        t = self.target
        self.offloaded = {}
        self.pd = PdMetadata(self.mods, t.cfg.metadata_slots) if t.cfg.pd else None
        # KVCache's constructor sets the chunk (8192); the MHA stand-in (kv_pool.py) lacks it and
        # the NHD flag SGLang's MHA pool sets from SGLANG_USE_HND_KVCACHE (default off).
        t.kv_pool.cpu_offloading_chunk_size = int(t.cfg.cpu_copy_chunk_tokens)
        if not hasattr(t.kv_pool, "use_hnd"):
            t.kv_pool.use_hnd = False

    def _pd_can_admit(self):
        pd = getattr(self, "pd", None)
        return pd is None or pd.can_receive()

    def _pd_receive(self, req):
        pd = getattr(self, "pd", None)
        if pd is not None and not pd.receive(req.rid, len(req.origin_input_ids)):
            raise self.DriverError(f"admit {req.rid}: no metadata slot (checked before admission)")

    def _index_write(self, req, slots, hashes):
        """The model's indexer writes the computed positions' index keys (sparse scenarios)."""
        from kvsim.sglang_target.retract_pool import has_index, write_index  # noqa: PLC0415
        if has_index(self.target.kv_pool):
            write_index(self.target.kv_pool, slots, hashes)

    def _drop_offloaded(self, rid):
        """Abort of an offloaded request: its CPU copy goes. True when it was one."""
        return getattr(self, "offloaded", {}).pop(str(rid), None) is not None

    def _retract_check(self):
        from kvsim.sglang_target import retract_checks  # noqa: PLC0415
        from kvsim.sglang_target.retract_pool import has_index  # noqa: PLC0415
        if getattr(self, "pd", None) is not None:
            self.pd.keep_only(set(self.reqs) | set(self.offloaded))
            v = retract_checks.check_metadata(self.pd)
            if v is not None:
                return v
        t = self.target
        if has_index(t.kv_pool):
            for rid, req in self.reqs.items():
                hashes = self.hashes[rid].extend_to(list(req.all_tokens))
                v = retract_checks.check_index_of(t, req, hashes, f"request {rid}'s sparse index")
                if v is not None:
                    return v
        return None

    # ---- calls --------------------------------------------------------------------------------
    def _call_offload(self, request):
        t = self.target
        if not t.cfg.pd:
            raise self.DriverError("offload is a PD decode call; the scenario's scheduler.mode is not 'pd'")
        req = self._req(request)
        rid = req.rid
        n = req.computed
        slots = t.req_to_token_pool.req_to_token[req.req_pool_idx, :n].to(torch.int64)
        owner = t.allocator if hasattr(t.allocator, "get_cpu_copy") else t.kv_pool
        cpu = owner.get_cpu_copy(slots) if n else None
        hashes = self.hashes[rid]
        req.kv_committed_len = n
        self._release(req, is_insert=False)
        self.offloaded[rid] = _Offloaded(req, hashes, cpu, n)
        return {}

    def _call_resume(self, request):
        from kvsim.sglang_target import retract_checks  # noqa: PLC0415
        from kvsim.sglang_target.retract_pool import has_index  # noqa: PLC0415
        t = self.target
        rid = str(request.get("rid"))
        rec = self.offloaded.get(rid)
        if rec is None:
            raise self.DriverError(f"resume {rid}: not offloaded")
        if t.req_to_token_pool.available_size() == 0:
            return {"resumed": False}
        ps = t.cfg.page_size
        pages = (rec.n + ps - 1) // ps
        new = None
        if pages:
            t.evict_for(pages * ps)
            new = t.allocator.alloc(pages * ps)
            if new is None:
                return {"resumed": False}
        del self.offloaded[rid]
        req = rec.req
        cache = t.cache
        req.req_pool_idx = t.req_to_token_pool.alloc_row()
        req.prefix_indices = torch.empty((0,), dtype=torch.int64, device="cuda")
        req.last_node = req.last_host_node = req.best_match_node = cache.root_node
        req.host_hit_length = 0
        req.cache_protected_len = 0
        req.kv_committed_freed = req.kv_overallocated_freed = False
        req.load_pending, req.load_consumer, req.reused = False, None, 0
        t.lock_request(req)
        req.kv_committed_len = req.kv_allocated_len = req.computed = rec.n
        self.reqs[rid] = req
        self.hashes[rid] = rec.hashes
        if rec.n:
            slots = new[: rec.n].to(torch.int64)
            t.req_to_token_pool.write((req.req_pool_idx, slice(0, rec.n)), slots.to(torch.int32))
            owner = t.allocator if hasattr(t.allocator, "load_cpu_copy") else t.kv_pool
            owner.load_cpu_copy(rec.cpu, slots)
        # The resumed request's forward reads its sparse index and metadata now.
        hashes = rec.hashes.extend_to(list(req.all_tokens))
        v = None
        if has_index(t.kv_pool):
            v = retract_checks.check_index_of(t, req, hashes, f"resumed request {rid}'s sparse index")
        if v is None and self.pd is not None:
            self.pd.keep_only(set(self.reqs) | set(self.offloaded))
            v = retract_checks.check_metadata(self.pd)
        if v is not None:
            # The driver's own _Found (its module is __main__ when run with -m).
            raise sys.modules[type(self).__module__]._Found(v)
        return {"resumed": True}
