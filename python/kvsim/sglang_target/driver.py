"""The SGLang target's driver: applies kvsim's calls (docs/sglang-target-protocol.md) to SGLang's
own cache on kvsim's fake device, checks SGLang's state after each, and answers.

    python -m kvsim.sglang_target.driver --sglang-src SPEC      # JSON lines on stdin/stdout

`Driver.handle(request) -> reply` is the same loop in-process (tests). Deterministic: no clock
(the logical clock moves on `tick`), no thread (the controller's storage workers are stepped by
the `storage` call: storage_steps.py), no randomness.

Here: the loop, hello and the request calls. Beside it, as Driver's mixins: driver_checks.py
(the checks after each call), progress_calls.py (poll, flush, evict, step, inject, tick),
storage_calls.py and retract.py; fork_server.py serves forked drivers."""

import argparse
import gc
import json
import sys
import traceback

import torch

from kvsim.sglang_target import fork_server
from kvsim.sglang_target.driver_checks import DriverChecks
from kvsim.sglang_target.progress_calls import ProgressCalls
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


class Driver(DriverChecks, ProgressCalls, StorageCalls, RetractCalls):
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


def serve_forks(args, out):
    """A fork server of this module's drivers (fork_server.serve_forks): one per unit, each
    starting from SGLang loaded once here."""
    def make_driver(device, mods):
        return Driver(args.sglang_src, content_every=args.content_every, preloaded=(device, mods))
    return fork_server.serve_forks(args.sglang_src, out, make_driver, serve, _freeze_loaded)


if __name__ == "__main__":
    sys.exit(main())
