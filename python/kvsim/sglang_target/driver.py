"""The SGLang target's driver: applies kvsim's calls (docs/sglang-target-protocol.md) to SGLang's
own cache on kvsim's fake device, checks SGLang's state after each, and answers.

    python -m kvsim.sglang_target.driver --sglang-src SPEC      # JSON lines on stdin/stdout

`Driver.handle(request) -> reply` is the same loop in-process (tests). Deterministic: no clock
(the logical clock moves on `tick`), no thread (the controller's storage workers are stepped by
the `storage` call: storage_steps.py), no randomness."""

import argparse
import gc
import importlib
import json
import os
import sys
import traceback

import torch

from kvsim.sglang_target.retract import RetractCalls
from kvsim.sglang_target.storage_calls import StorageCalls

PROTOCOL = 1
CONTENT_EVERY = 1  # full content walk every N calls (and at quiescence)
GC_EVERY = 64  # a full garbage collection every N calls (see Driver.handle)


class DriverError(Exception):
    """A request the driver refuses (bad input or an unsupported configuration): ok false."""


# August 2026's UnifiedRadixCache also counts SWA and Mamba host hits in its match result; its
# init_load_back loads back when any of them (or the FULL host hit) is positive.
_SIDE_HOST_HITS = ("swa_host_hit_length", "mamba_host_hit_length")


class Driver(StorageCalls, RetractCalls):
    DriverError = DriverError

    def __init__(self, sglang_src, cache_dir=None, content_every=CONTENT_EVERY, preloaded=None):
        self.sglang_src = sglang_src
        # (device, mods) loaded before a fork (serve_forks): hello builds on them instead of
        # loading SGLang again. Both are untouched at the fork, so a forked driver starts from
        # the same state as a fresh one.
        self.preloaded = preloaded
        self.cache_dir = cache_dir
        self.content_every = int(content_every)
        self.target = None
        self.device = None
        self.mods = None
        self.reqs = {}  # rid -> Req, in admission order
        self.hashes = {}  # rid -> PrefixHashes
        self.calls = 0
        self.full_every = 1  # the scenario's check.full_every (hello)
        self.full_checks = 0
        self._since_full = 0
        self._last_nodes = 0
        self.dead = None  # the violation that stopped the run
        self._seen_violations = 0
        self._release_after = []  # injected holds released at the end of the next call
        self._host_held = 0  # host tokens inject target 0 holds now (_host_hold_limit)
        self.prefetching = {}
        self.host_allocs = None
        self._decisions = {}  # this call's counted decisions (evictions, acks)
        self.exits_after_close = False  # a fork server's child: close() leaves the process as is

    # ---- the loop ------------------------------------------------------------------------------
    def handle(self, request):
        if not isinstance(request, dict) or "call" not in request:
            return self._refuse(f"a request is a JSON object with 'call', got {request!r:.80}")
        call = request["call"]
        if call == "bye":
            self.close()
            return None
        if self.dead is not None:
            return self._refuse("a violation was reported; only 'bye' is accepted now")
        if call != "hello" and self.target is None:
            return self._refuse(f"'{call}' before 'hello'")
        handler = getattr(self, f"_call_{call}", None)
        if handler is None:
            return self._refuse(f"unknown call {call!r}")
        self.calls += 1
        # Python's cyclic garbage collector runs when allocation counters say so, and those
        # counters carry the history of the process (a fork server's child inherits its
        # server's). A collection frees device tensors held in cycles, which the fake device's
        # lifetime model sees. So collection is explicit: off from hello on, a full collection
        # at hello and every GC_EVERY calls — the same points in a fresh or a forked driver.
        if call == "hello":
            gc.collect()
            gc.disable()
        elif self.calls % GC_EVERY == 0:
            gc.collect()
        self._decisions = {}
        if self.host_allocs is not None:
            self.host_allocs.take()
        holds, self._release_after = self._release_after, []
        try:
            reply = handler(request) or {}
        except DriverError as exc:
            return self._refuse(str(exc))
        except Exception as exc:  # noqa: BLE001 - SGLang's exception is a finding
            violation = exc.violation if isinstance(exc, _Found) else \
                (self._device_violation() or self._exception_violation(exc))
            if violation is None:
                return self._refuse(f"driver error in '{call}': {type(exc).__name__}: {exc}\n"
                                    + "".join(traceback.format_exc(limit=6)))
            return self._violation_reply({}, violation)
        finally:
            for release in holds:
                release()
        reply = {"ok": True, **reply}
        if self._decisions:
            reply["decisions"] = {**self._decisions, **reply.get("decisions", {})}
        violation = self._device_violation() or (None if call == "hello" else self._check(call))
        if violation is not None:
            return self._violation_reply(reply, violation)
        reply["state"] = self._state()
        return reply

    def _refuse(self, error):
        return {"ok": False, "error": error}

    def _violation_reply(self, reply, violation):
        self.dead = violation
        reply = dict(reply)
        reply.setdefault("ok", True)
        reply["violation"] = violation.as_dict()
        if self.target is not None:
            try:
                reply["state"] = self._state()
            except Exception:  # noqa: BLE001 - the state after a crash may be unreadable
                reply["state"] = {"budget": 0, "storage_reads": False, "loads_queued": False}
        return reply

    def _state(self):
        loads_queued = any(getattr(r, "load_pending", False) for r in self.reqs.values())
        reads, pending = self._storage_state()
        return {"budget": self.target.budget(), "storage_reads": reads, "loads_queued": loads_queued,
                "storage_pending": pending, "full_checks": self.full_checks}

    # ---- checks --------------------------------------------------------------------------------
    def _device_violation(self):
        if self.device is None or len(self.device.violations) == self._seen_violations:
            return None
        v = self.device.violations[self._seen_violations]
        self._seen_violations = len(self.device.violations)
        from kvsim.sglang_target.checks import Violation  # noqa: PLC0415
        return Violation(v.kind, v.detail)

    def _exception_violation(self, exc):
        """sglang.exception naming the innermost frame in the SGLang tree; None when no SGLang
        frame is on the traceback (a driver bug, reported as a refusal)."""
        from kvsim.sglang_target.checks import Violation  # noqa: PLC0415
        if self.mods is None:
            return None
        tree = os.path.abspath(self.mods.source.python_dir) + os.sep
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if os.path.abspath(f.filename).startswith(tree)]
        if not frames:
            return None
        f = frames[-1]
        where = f"{os.path.relpath(f.filename, tree)}:{f.lineno} ({f.name})"
        return Violation("sglang.exception", f"{type(exc).__name__}: {str(exc)[:300]} at {where}")

    # Calls that change nothing in the cache (the clock, reads of the state) do not count toward
    # the automatic full-check spacing, as kvsim's executor does not count ticks and liveness
    # checks there; an explicit full_every counts every call.
    _STILL_CALLS = frozenset({"tick", "read", "hello"})

    def _full_check_due(self, call):
        """The tree walks follow the scenario's check.full_every, as kvsim's core does: every N
        calls, or (0, auto) once per (tree nodes + pool pages) / 8 calls that may change the
        cache, so their cost per call stays constant whatever the size of the tree. Always at
        quiescence."""
        if call == "quiescent":
            return True
        every = self.full_every
        if every <= 0 and call in self._STILL_CALLS:  # as the core's auto spacing: not counted
            return False
        self._since_full += 1
        if every <= 0:
            cfg = self.target.cfg
            pages = (cfg.device_tokens + cfg.host_tokens) // max(cfg.page_size, 1)
            every = max(1, (self._last_nodes + pages) // 8)
        if self._since_full < every:
            return False
        self._since_full = 0
        return True

    def _check(self, call):
        from kvsim.sglang_target import checks  # noqa: PLC0415
        t = self.target
        if getattr(t, "hybrid", False):
            from kvsim.sglang_target.hybrid_checks import check_hybrid  # noqa: PLC0415
            return check_hybrid(self, call)
        # Every call: the prefetch liveness check reads the host allocations this call made.
        allocs = self.host_allocs.take() if self.host_allocs is not None else []
        v = checks.check_prefetch_liveness(t, allocs)
        if v is not None:
            return v
        reqs = list(self.reqs.values())
        # The slots and content checks of this call share one join of the walked nodes' values
        # and the content check the walk itself (the checks between them change nothing).
        shared = []

        def values(nodes):
            if not shared:
                shared.append(checks.NodeValues(nodes))
            return shared[0]
        return self.run_full_checks(
            call,
            (lambda nodes: checks.check_residency(t, nodes), lambda nodes: checks.check_locks(t, nodes),
             lambda nodes: checks.check_tree_shape(t, nodes),
             lambda nodes: checks.check_slots(t, nodes, reqs, values(nodes)),
             lambda nodes: checks.check_storage_keys(t, nodes), lambda nodes: self._retract_check()),
            lambda nodes: checks.check_content_full(t, nodes, values(nodes))
            or checks.check_storage_content(t, nodes))

    def run_full_checks(self, call, node_checks, content_check):
        """When a full check is due (_full_check_due): walks the tree once, runs `node_checks` (each
        takes the walked nodes) in order to the first violation, then `content_check` every
        content_every full checks and at quiescence. The plain, hybrid and Mamba targets' schedule."""
        from kvsim.sglang_target import checks  # noqa: PLC0415
        if not self._full_check_due(call):
            return None
        nodes = checks.walk(self.target.cache.root_node)
        self._last_nodes = len(nodes)
        self.full_checks += 1
        for check in node_checks:
            v = check(nodes)
            if v is not None:
                return v
        if self.content_every and (self.full_checks % self.content_every == 0 or call == "quiescent"):
            return content_check(nodes)
        return None

    # ---- calls -----------------------------------------------------------------------------------
    def _call_hello(self, request):
        from kvsim.fakecuda import FakeDevice  # noqa: PLC0415
        from kvsim.sglang_target import load_sglang  # noqa: PLC0415
        from kvsim.sglang_target.target import CacheConfig, Target, TargetConfigError  # noqa: PLC0415
        if self.target is not None:
            raise DriverError("'hello' twice")
        if request.get("protocol") != PROTOCOL:
            raise DriverError(f"protocol {request.get('protocol')!r} is not {PROTOCOL}")
        from kvsim.sglang_target.hybrid import HybridTarget, hybrid_config, hybrid_kind  # noqa: PLC0415
        try:
            hybrid = hybrid_config(request.get("scenario")) if hybrid_kind(request.get("scenario")) else None
            cfg = hybrid[0] if hybrid else CacheConfig.from_scenario(request.get("scenario") or {})
        except TargetConfigError as exc:
            raise DriverError(str(exc)) from None
        check = (request.get("scenario") or {}).get("check") or {}
        self.full_every = int(check.get("full_every", 1))
        if self.preloaded is not None:
            self.device, self.mods = self.preloaded
            self.preloaded = None
            self.device.reseed(int(request.get("seed", 0)))
        else:
            self.device = FakeDevice(seed=int(request.get("seed", 0)))
            self.device.install()
            from kvsim.sglang_target.source import resolve_source  # noqa: PLC0415
            src = resolve_source(self.sglang_src, cache_dir=self.cache_dir)
            self.mods = load_sglang(src, device=self.device)
            _freeze_loaded()
        # A real monotonic clock moves between two reads; a frozen one stamps every node of the
        # run with one time, and SGLang's LRU (a heap of last_access_time) then picks victims in
        # set order. 1 ns a read keeps reads ordered, as kvsim's core's touch counter does.
        self.device.clock.tick = 1e-9
        try:
            self.target = HybridTarget(self.mods, self.device, *hybrid) if hybrid else \
                Target(self.mods, self.device, cfg)
        except TargetConfigError as exc:
            raise DriverError(str(exc)) from None
        self.target.held_device = []
        self._storage_setup()
        self._pd_setup()
        self._count_evictions()
        s = self.mods.source
        opts = cfg.storage_options()
        from kvsim.sglang_target.hybrid_capabilities import capabilities  # noqa: PLC0415
        # commit "" when unknown (a plain source tree: no git, no stamp): kvsim reads a string.
        return {"sglang": {"root": s.root, "commit": s.commit or "", "tag": s.tag, "era": self.mods.era.name,
                           "kv_pool": self.target.kv_pool_kind, "capabilities": capabilities(self.mods)},
                "streams": self.target.streams, "stream_count": len(self.device.streams),
                "storage": opts is not None, "storage_backend": None if opts is None else opts["backend"]}

    def _count_evictions(self):
        """Wraps the cache's evict / evict_host (instance attributes: SGLang's own callers go
        through them) to count what each frees: the call's decisions evicted_device /
        evicted_host."""
        t = self.target
        cache = t.cache

        def counted(name, key, pool):
            original = getattr(cache, name)

            def wrapper(*args, **kwargs):
                before = int(pool.available_size())
                try:
                    return original(*args, **kwargs)
                finally:
                    freed = int(pool.available_size()) - before
                    if freed > 0:
                        self._decisions[key] = self._decisions.get(key, 0) + freed
            setattr(cache, name, wrapper)
        counted("evict", "evicted_device", t.allocator)
        if t.host_pool is not None:
            counted("evict_host", "evicted_host", t.host_pool)

    def _req(self, request, must=True):
        rid = str(request.get("rid"))
        req = self.reqs.get(rid)
        if req is None and must:
            raise DriverError(f"unknown request {rid!r}")
        return req

    def _call_admit(self, request):
        from kvsim.sglang_target.checks import extra_key_of_ns  # noqa: PLC0415
        from kvsim.sglang_target.content import PrefixHashes  # noqa: PLC0415
        from kvsim.sglang_target.requests import Req  # noqa: PLC0415
        t = self.target
        rid = str(request.get("rid"))
        if rid in self.reqs:
            raise DriverError(f"request {rid} admitted twice")
        if t.storage is not None and rid in t.cache.ongoing_prefetch:
            raise DriverError(f"admit of {rid} while its prefetch is live: SGLang's scheduler admits a "
                              "request only once prefetch_check answers done")
        tokens = [int(x) for x in request.get("tokens") or []]
        if not tokens:
            raise DriverError("admit needs tokens")
        ns = int(request.get("ns", 0))
        req = Req(rid, tokens, ns, t.token_type, extra_key_of_ns(ns))
        ps = t.cfg.page_size
        cache = t.cache
        device_hit = host_hit = 0
        if request.get("prefix_cache", True):
            # SGLang matches at most len - 1 tokens (the last one is recomputed for its logits).
            m = t.match_prefix(t.radix_key(tokens[: len(tokens) - 1], req.extra_key))
            req.prefix_indices = m.device_indices
            req.last_node = m.last_device_node
            req.last_host_node = m.last_host_node
            best = getattr(m, "best_match_node", None)  # a NodeId (August 2026) may be 0
            req.best_match_node = m.last_host_node if best is None else best
            req.host_hit_length = int(getattr(m, "host_hit_length", 0) or 0)
            for name in _SIDE_HOST_HITS:
                setattr(req, name, int(getattr(m, name, 0) or 0))
        else:
            req.prefix_indices = torch.empty((0,), dtype=torch.int64, device="cuda")
            req.last_node = req.last_host_node = req.best_match_node = cache.root_node
        device_hit, host_hit = len(req.prefix_indices), req.host_hit_length
        anchor = req.last_node
        anchor_lock = t.lock(anchor)  # the scheduler's admission lock (PrefillAdder._lock_node)
        loaded = 0
        try:
            need = len(tokens) - device_hit + ps
            if need >= t.budget() or not self._pd_can_admit() or not self._room_for(req):
                return {"admitted": False, "device_hit": device_hit, "host_hit": host_hit, "owned_from": 0}
            if request.get("load_back", True) and t.controller is not None and \
                    (host_hit > 0 or any(getattr(req, name, 0) > 0 for name in _SIDE_HOST_HITS)):
                quota = int(request.get("quota", -1))
                queued = len(t.controller.load_queue)
                new_indices, req.last_node = t.init_load_back(req, None if quota < 0 else quota)
                loaded = len(new_indices)
                if loaded:
                    req.prefix_indices = torch.cat([req.prefix_indices, new_indices])
                # A load-back can queue a transfer with no KV tokens (HiMamba: only the Mamba state
                # is on the host). SGLang's scheduler starts every queued load once per prefill batch
                # (ready_to_load_host_cache) and the forward waits on it, so it is pending here too.
                if loaded or len(t.controller.load_queue) > queued:
                    req.load_pending = True
        finally:
            t.unlock(anchor, anchor_lock)
        t.lock_request(req)
        p = len(req.prefix_indices)
        req.cache_protected_len = p
        req.req_pool_idx = t.req_to_token_pool.alloc_row()
        if p:
            t.req_to_token_pool.write((req.req_pool_idx, slice(0, p)), req.prefix_indices.to(torch.int32))
        req.kv_committed_len = req.kv_allocated_len = req.computed = p
        req.reused = p
        self.reqs[rid] = req
        self.hashes[rid] = PrefixHashes(ns)
        self._pd_receive(req)  # PD decode: the prefill's metadata arrives (retract.py)
        if getattr(req, "load_pending", False) and not request.get("defer_load", False):
            self._start_loads()
        return {"admitted": True, "device_hit": device_hit, "host_hit": host_hit, "owned_from": p,
                "decisions": {"loaded": loaded, "device_hit": device_hit, "host_hit": host_hit}}

    def _room_for(self, req):
        """SGLang's scheduler admits no more running requests than its request pool has rows
        (get_num_allocatable_reqs), and a target with per-request state beside the KV (Mamba:
        mamba_admission.py) says whether the request's fits; otherwise the request waits."""
        t = self.target
        if t.req_to_token_pool.available_size() < 1:
            return False
        can_admit = getattr(t, "can_admit", None)
        return can_admit is None or can_admit(req)

    def _start_loads(self):
        t = self.target
        if t.controller is None:
            return -1
        idx = t.cache.ready_to_load_host_cache()
        if idx is not None and idx >= 0:
            for req in self.reqs.values():
                if getattr(req, "load_pending", False):
                    req.load_pending = False
                    req.load_consumer = idx
        return idx

    def _call_start_loads(self, request):
        idx = self._start_loads()
        if idx is not None and idx >= 0:
            # The model's forward: the compute stream waits per layer, then reads the prefixes.
            for req in self.reqs.values():
                if req.load_consumer == idx:
                    self._model_read(req)
        return {}

    def _model_read(self, req):
        """The forward reads the request's reused prefix (after waiting on its load-back)."""
        from kvsim.sglang_target import checks  # noqa: PLC0415
        t = self.target
        if req.reused == 0 or getattr(req, "read_checked", False):
            return
        if getattr(req, "load_pending", False):
            self._start_loads()
        counter = t.controller.layer_done_counter if t.controller is not None else None
        if counter is not None:
            counter.set_consumer(req.load_consumer if req.load_consumer is not None else -1)
        try:
            slots = t.req_to_token_pool.req_to_token[req.req_pool_idx, : req.reused].to(torch.int64)
            got = checks.read_device_kv(t, slots, wait=True)
            wait_side_layers = getattr(t, "wait_side_layers", None)  # Mamba layers (mamba.py)
            if wait_side_layers is not None:
                wait_side_layers()
        finally:
            if counter is not None:
                counter.set_consumer(-1)
        hashes = self.hashes[req.rid].extend_to(list(req.all_tokens))[: req.reused]
        req.read_checked = True
        v = checks.compare(f"request {req.rid} reads its reused prefix [0, {req.reused})", got, hashes, t)
        if v is not None:
            raise _Found(v)

    def _call_compute(self, request):
        from kvsim.sglang_target.content import expected_kv  # noqa: PLC0415
        t = self.target
        req = self._req(request)
        tokens = [int(x) for x in request.get("tokens") or []]
        n = int(request.get("n"))
        try:
            req.set_tokens(tokens)
        except ValueError as exc:
            raise DriverError(str(exc)) from None
        if n > len(tokens):
            raise DriverError(f"compute {req.rid}: n={n} past its {len(tokens)} tokens")
        if n <= req.computed:
            return {"computed": True}
        if request.get("oom"):
            return {"computed": False}
        can_compute = getattr(t, "can_compute", None)  # per-request state beside the KV (Mamba)
        if can_compute is not None and not can_compute(req, n):
            return {"computed": False}
        if not self._alloc_positions(req, n):
            return {"computed": False}
        self._model_read(req)
        start = req.computed
        hashes = self.hashes[req.rid].extend_to(tokens)[start:n]
        k, v = expected_kv(hashes, t.cfg.layer_count, 1, t.cfg.head_dim)
        slots = t.req_to_token_pool.req_to_token[req.req_pool_idx, start:n].to(torch.int64)
        for layer in range(t.cfg.layer_count):
            t.kv_pool.k_buffer[layer][slots] = k[layer].to("cuda")
            t.kv_pool.v_buffer[layer][slots] = v[layer].to("cuda")
        self._index_write(req, slots, hashes)
        if getattr(t, "hybrid", False):
            t.after_compute(req, start, n, hashes)  # SWA layers; out-of-window SWA slots (hybrid.py)
        prompt = len(req.origin_input_ids)
        req.computed = req.kv_committed_len = n
        if start < prompt:
            # The scheduler caches a prefill's prefix: each middle chunk (chunked), then the end.
            t.cache.cache_unfinished_req(req, chunked=n < prompt) if n < prompt else \
                t.cache.cache_unfinished_req(req)
        return {"computed": True}

    def _call_read(self, request):
        """The model's read of the request's first n tokens, in compute-stream order."""
        from kvsim.sglang_target import checks  # noqa: PLC0415
        t = self.target
        req = self._req(request)
        n = int(request.get("n", req.computed))
        if n > req.kv_allocated_len:
            raise DriverError(f"read {req.rid}: n={n} past its {req.kv_allocated_len} slots")
        if n == 0:
            return {}
        if getattr(req, "load_pending", False):
            self._start_loads()
        counter = t.controller.layer_done_counter if t.controller is not None else None
        if counter is not None:
            counter.set_consumer(req.load_consumer if req.load_consumer is not None else -1)
        try:
            slots = t.req_to_token_pool.req_to_token[req.req_pool_idx, :n].to(torch.int64)
            got = checks.read_device_kv(t, slots, wait=True)
            # This read is the batch's forward (the simulator's read after admit or start_loads):
            # it runs every layer, so it waits on the side layers' load events too, as
            # _model_read does (SGLang's mamba2_layer_cache waits on the Mamba layers).
            wait_side_layers = getattr(t, "wait_side_layers", None)
            if wait_side_layers is not None:
                wait_side_layers()
        finally:
            if counter is not None:
                counter.set_consumer(-1)
        hashes = self.hashes[req.rid].extend_to(list(req.all_tokens))[:n]
        v = checks.compare(f"request {req.rid} reads [0, {n})", got, hashes, t)
        if v is not None:
            raise _Found(v)
        return {}

    def _alloc_positions(self, req, n):
        """Slots for positions [kv_allocated_len, n): the rest of the last page, then new pages,
        evicting first as SGLang's alloc_paged_token_slots_extend does."""
        t = self.target
        ps = t.cfg.page_size
        start = req.kv_allocated_len
        row = t.req_to_token_pool.req_to_token[req.req_pool_idx]
        pieces = []
        num1 = 0
        if start % ps:
            num1 = min(n, (start + ps - 1) // ps * ps) - start
            last = int(row[start - 1])
            pieces.append(torch.arange(last + 1, last + 1 + num1, dtype=torch.int64, device="cuda"))
        rest = n - start - num1
        if rest > 0:
            pages = (rest + ps - 1) // ps
            t.evict_for(rest + (ps if ps > 1 else 0))
            new = t.alloc_tokens(pages * ps)
            if new is None:
                return False
            pieces.append(new[:rest].to(torch.int64))
        slots = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
        t.req_to_token_pool.write((req.req_pool_idx, slice(start, n)), slots.to(torch.int32))
        req.kv_allocated_len = n
        return True

    def _release(self, req, is_insert):
        t = self.target
        ps = t.cfg.page_size
        t.cache_finished_req(req, is_insert=is_insert)
        start = (req.kv_committed_len + ps - 1) // ps * ps
        if start < req.kv_allocated_len:
            t.allocator.free(t.req_to_token_pool.req_to_token[req.req_pool_idx, start:req.kv_allocated_len]
                             .to(torch.int64))
        t.req_to_token_pool.free(req)
        del self.reqs[req.rid]
        self.hashes.pop(req.rid, None)

    def _finish_like(self, request, is_insert):
        req = self._req(request)
        computed = int(request.get("computed", req.computed))
        if computed > req.computed:
            raise DriverError(f"request {req.rid}: computed {computed} > the {req.computed} it computed")
        req.kv_committed_len = computed
        self._release(req, is_insert)
        return {}

    def _call_finish(self, request):
        return self._finish_like(request, is_insert=True)

    def _call_retract(self, request):
        # SGLang's retract: release_kv_cache(req, tree_cache, is_insert=False).
        return self._finish_like(request, is_insert=False)

    def _call_abort(self, request):
        req = self._req(request, must=False)
        if req is None and self._drop_offloaded(request.get("rid")):
            return {}  # an offloaded request (PD decode): its CPU copy goes
        if req is not None:
            # A running request aborted finishes through release_kv_cache (is_insert=True).
            req.kv_committed_len = req.computed
            self._release(req, is_insert=True)
        elif self.target.controller is not None:
            # A waiting request (SGLang's abort_request on the waiting queue): its prefetch ends.
            release = getattr(self.target.cache, "release_aborted_request", None)
            if release is not None:  # UnifiedRadixCache (hybrid) has no prefetch to end
                release(str(request.get("rid")))
            self.prefetching.pop(str(request.get("rid")), None)
        return {}

    def _acks_pending(self):
        cc = self.target.controller
        return len(cc.ack_write_queue), len(cc.ack_load_queue)

    def _poll_counted(self):
        """check_hicache_events, counting the write and load acks it consumed."""
        w0, l0 = self._acks_pending()
        self.target.cache.check_hicache_events()
        w1, l1 = self._acks_pending()
        for key, n in (("write_acks", w0 - w1), ("load_acks", l0 - l1)):
            if n > 0:
                self._decisions[key] = self._decisions.get(key, 0) + n

    def _call_poll(self, request):
        if self.target.controller is not None:
            self._poll_counted()
        return {}

    def _call_flush(self, request):
        t = self.target
        self.device.drain()
        if t.controller is not None:
            for _ in range(4):
                self._poll_counted()
                if not t.controller.ack_write_queue and not t.controller.ack_load_queue:
                    break
            if request.get("storage") and t.storage is not None:
                self._drain_storage()
                self.device.drain()
                self._poll_counted()
        return {}

    def _call_evict(self, request):
        """SGLang's device eviction of n tokens (the scheduler's evict_from_tree_cache asks it)."""
        n = int(request.get("n", 0))
        if n < 0:
            raise DriverError(f"evict: n={n} < 0")
        self.target.evict(n)
        return {}

    def _call_evict_host(self, request):
        """HiRadixCache.evict_host(n): what SGLang calls when host memory is short (a backup's or
        a prefetch's allocation failed)."""
        n = int(request.get("n", 0))
        if n < 0:
            raise DriverError(f"evict_host: n={n} < 0")
        if self.target.controller is None:
            raise DriverError("evict_host: the cache has no host tier (cache.hierarchical false)")
        self.target.cache.evict_host(n)
        return {}

    def _call_step(self, request):
        stream_no = int(request.get("stream"))
        streams = self.device.streams
        if not 0 <= stream_no < len(streams):
            raise DriverError(f"no stream {stream_no} (streams: {self.target.streams})")
        if getattr(self, "_streams_frozen", False):
            return {"ran": 0}  # inject target 2: the GPU is slow this call
        return {"ran": self.device.step(streams[stream_no], int(request.get("n", 1)))}

    def _call_inject(self, request):
        t = self.target
        kind, keep = int(request.get("target")), int(request.get("n", 0))
        ps = t.cfg.page_size
        if kind == 0 and t.host_pool is not None:
            take = min(t.host_pool.available_size() - keep * ps, self._host_hold_limit())
            if take > 0:
                held = t.host_pool.alloc(take)
                if held is not None:
                    self._host_held += len(held)

                    def release_host():
                        self._host_held -= len(held)
                        t.host_pool.free(held)
                    self._release_after.append(release_host)
        elif kind == 1:
            take = (t.allocator.available_size() // ps - keep) * ps
            if take > 0:
                held = t.alloc_tokens(take)  # FULL and, for the hybrid target, SWA slots (hybrid.py)
                if held is not None:
                    t.held_device.append(held)

                    def release():
                        t.held_device.remove(held)
                        t.allocator.free(held)
                    self._release_after.append(release)
        elif kind == 2:
            # A slow GPU: the copy streams make no progress through the next call (its `step`s
            # run nothing). Queries stay truthful: an event whose work has run queries True on
            # real hardware, and SGLang relies on it (LayerDoneCounter.update_producer asserts a
            # reused producer's finish event is done); a blocking wait still completes.
            self._streams_frozen = True

            def thaw():
                self._streams_frozen = False
            self._release_after.append(thaw)
        elif kind not in (0, 1, 2):
            raise DriverError(f"inject target {kind} is not 0, 1 or 2")
        return {}

    def _host_hold_limit(self):
        """Host tokens inject target 0 may still hold. A held page stands for one a real holder
        outside the tree has. With a storage tier that is an in-flight prefetch, and one prefetch
        may take every free page. Without one SGLang has no such holder: only the tree's copies
        fill the host, and those evict_host cannot free belong to nodes on the device. SGLang
        asserts a host pool larger than its device pool ("with the current protocol"), so a
        write-back's evict_host always finds room. The hold therefore leaves more room than the
        device pool has, as a host pool SGLang would build does."""
        t = self.target
        if getattr(t, "storage", None) is not None:
            return t.host_pool.available_size()
        ps = t.cfg.page_size
        room = t.host_pool.size - t.host_pool.device_pool.size - ps - self._host_held
        return max(0, room // ps * ps)

    def _call_tick(self, request):
        now = float(request.get("now")) / 1000.0  # ticks are logical milliseconds
        if now > self.device.clock.now():
            self.device.clock.set(now)
        return {}

    def _call_quiescent(self, request):
        from kvsim.sglang_target import checks  # noqa: PLC0415
        if getattr(self.target, "hybrid", False):
            from kvsim.sglang_target.hybrid_checks import check_quiescent  # noqa: PLC0415
            v = check_quiescent(self.target, list(self.reqs.values()))
        else:
            v = checks.check_quiescent(self.target, list(self.reqs.values()), self.prefetching)
        if v is not None:
            raise _Found(v)
        return {}

    def close(self):
        gc.enable()
        if self.target is not None:
            self.target.close()
        if self.exits_after_close:
            # A fork server's child exits right after: unloading SGLang's modules and the fake
            # device would only spend the CPU the next run (a hunt unit, a shrink candidate) needs.
            self.target = None
            return
        if self.mods is not None:
            self.mods.unload()
            self.mods = None
        if self.device is not None:
            self.device.uninstall()
        self.target = None


def _freeze_loaded():
    """Moves what exists once torch and SGLang's modules are loaded (and the fake device
    installed) out of the collector's sight (gc.freeze): the driver's collections at fixed calls
    then scan only what the run made, not the ~10^5 objects of torch and SGLang (0.3-0.5 s
    each otherwise). Nothing the run makes is frozen, so each collection frees the same cycles;
    a fresh driver and a fork server's child freeze at the same point."""
    gc.collect()
    gc.freeze()


class _Found(Exception):
    """A check found a violation in the middle of a call."""

    def __init__(self, violation):
        super().__init__(violation.detail)
        self.violation = violation


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kvsim.sglang_target.driver",
                                     description="kvsim's SGLang target driver (JSON lines on stdin/stdout)")
    parser.add_argument("--sglang-src", required=True,
                        help="an SGLang checkout, its python/ folder, 'installed' or 'bundle:<tag>'")
    parser.add_argument("--content-every", type=int, default=CONTENT_EVERY)
    parser.add_argument("--serve-forks", action="store_true",
                        help="load SGLang once, then fork one driver per {'fork': {'in', 'out'}} "
                             "request (FIFO paths), answering {'pid': N}")
    args = parser.parse_args(argv)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything SGLang prints goes to stderr; stdout carries the protocol
    if args.serve_forks:
        return serve_forks(args, out)
    driver = Driver(args.sglang_src, content_every=args.content_every)
    return serve(driver, sys.stdin, out)


def serve(driver, inp, out):
    """The protocol loop: one reply line per request line until 'bye' or end of input."""
    for line in inp:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            reply = {"ok": False, "error": f"not JSON: {exc}"}
        else:
            reply = driver.handle(request)
        if reply is None:
            break
        out.write(json.dumps(reply, sort_keys=True) + "\n")
        out.flush()
    driver.close()
    return 0


def _lines_while_parent_lives():
    """Standard input's lines, until it ends or the process that started this one is gone (a
    server whose kvsim was killed must not linger: it checks once a second)."""
    import select  # noqa: PLC0415
    parent = os.getppid()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if not ready:
            if os.getppid() != parent:
                return
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8")


def serve_forks(args, out):
    """A fork server: torch imported and SGLang loaded once (the 1-2 s a driver takes to start),
    then one forked driver per unit. Each child opens the two FIFOs it is given (input first,
    as the simulator opens them), serves one run and exits; the server answers the child's pid.
    A child starts from the server's state, in which the device and SGLang's modules are
    untouched, so it behaves as a fresh driver would. The server waits for its children (so that
    their CPU time counts in kvsim's, which waits for the server) and, when it ends, stops any
    still running (_end_children)."""
    from kvsim.fakecuda import FakeDevice  # noqa: PLC0415
    from kvsim.sglang_target import load_sglang  # noqa: PLC0415
    from kvsim.sglang_target.source import resolve_source  # noqa: PLC0415
    device = FakeDevice(seed=0)
    device.install()
    try:
        mods = load_sglang(resolve_source(args.sglang_src), device=device)
        # The driver's own modules that hello and the calls import: once here, not in every
        # child (an import there compiles or reads them again: ~0.1 s of each run's start).
        # (One that fails to import here fails again, with its message, where a child needs it.)
        for name in ("target", "checks", "content", "requests", "metadata", "hybrid", "hybrid_capabilities",
                     "retract_checks", "retract_pool"):
            try:
                importlib.import_module(f"kvsim.sglang_target.{name}")
            except ImportError:
                pass
        _freeze_loaded()
        from kvsim.sglang_target.hybrid_capabilities import capabilities  # noqa: PLC0415
        out.write(json.dumps({"ok": True, "sglang": {"commit": mods.source.commit or "",
                                                     "capabilities": capabilities(mods)}}) + "\n")
    except Exception as exc:  # noqa: BLE001 - reported to the simulator, which stops
        out.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return 2
    out.flush()
    children = set()
    try:
        _serve_fork_requests(args, out, device, mods, children)
    finally:
        _end_children(children)
    return 0


def _reap_children(children):
    """Waits for the children that have exited (no zombies left between two runs)."""
    for pid in sorted(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done == pid:
            children.discard(pid)


def _end_children(children, grace_s=0.5):
    """At the server's end: children still running get grace_s to finish (a run's 'bye' closes
    its storage folder), then SIGKILL (within the 1 s kvsim gives the server before it kills it). A driver stuck in a call (a hunt worker killed for a hang
    closed its pipes, but the driver never reads again) or blocked opening FIFOs that kvsim never
    opened would otherwise outlive the hunt and take a core."""
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415
    deadline = time.monotonic() + grace_s  # wall time only bounds the wait; no run reads it
    while children and time.monotonic() < deadline:
        _reap_children(children)
        if children:
            time.sleep(0.02)
    for pid in sorted(children):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    children.clear()


def _serve_fork_requests(args, out, device, mods, children):
    """The fork server's loop: one forked driver per request line, its pid answered."""
    for line in _lines_while_parent_lives():
        _reap_children(children)
        try:
            request = json.loads(line)
            paths = request["fork"]
            fifo_in, fifo_out = str(paths["in"]), str(paths["out"])
            # A zygote's request (zygote.py) also names the run's stderr file and environment.
            err_path = str(paths["stderr"]) if paths.get("stderr") else None
            env = {str(k): str(v) for k, v in paths["env"].items()} if "env" in paths else None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            out.write(json.dumps({"ok": False, "error": f"bad fork request: {exc}"}) + "\n")
            out.flush()
            continue
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # The server's protocol pipes are not the child's: it talks over its FIFOs only.
            os.close(0)
            code = 0
            try:
                if err_path is not None:
                    os.dup2(os.open(err_path, os.O_WRONLY | os.O_APPEND), 2)
                os.dup2(2, 1)
                if env is not None:
                    os.environ.clear()
                    os.environ.update(env)
                with open(fifo_in, "r", encoding="utf-8") as inp, \
                        open(fifo_out, "w", encoding="utf-8") as child_out:
                    driver = Driver(args.sglang_src, content_every=args.content_every,
                                    preloaded=(device, mods))
                    driver.exits_after_close = True
                    code = serve(driver, inp, child_out)
            except BaseException:  # noqa: BLE001 - a child never returns into the server loop
                traceback.print_exc()
                code = 2
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.add(pid)
        out.write(json.dumps({"ok": True, "pid": pid}) + "\n")
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
