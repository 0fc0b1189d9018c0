"""The driver's checks after each call (driver.py): the fake device's violations, SGLang's own
exceptions, and the tree walks at the scenario's check.full_every spacing (checks.py for the
plain target, hybrid_checks.py for the hybrid ones), plus the eviction counters the calls'
decisions report."""

import os
import traceback


class DriverChecks:
    """A mixin of Driver: reads self.device, self.mods, self.target, self.reqs and the spacing
    counters Driver.__init__ sets."""

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
