"""The driver's calls that move the cache and its clock rather than a request (driver.py;
docs/sglang-target-protocol.md): poll (check_hicache_events), flush, evict and evict_host,
step (one copy stream of the fake device), inject (pages held outside the tree, a slow GPU)
and tick (the logical clock)."""


class ProgressCalls:
    """A mixin of Driver: reads self.target, self.device and the inject holds Driver.__init__
    sets; records decisions in self._decisions."""

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
            raise self.DriverError(f"evict: n={n} < 0")
        self.target.evict(n)
        return {}

    def _call_evict_host(self, request):
        """HiRadixCache.evict_host(n): what SGLang calls when host memory is short (a backup's or
        a prefetch's allocation failed)."""
        n = int(request.get("n", 0))
        if n < 0:
            raise self.DriverError(f"evict_host: n={n} < 0")
        if self.target.controller is None:
            raise self.DriverError("evict_host: the cache has no host tier (cache.hierarchical false)")
        self.target.cache.evict_host(n)
        return {}

    def _call_step(self, request):
        stream_no = int(request.get("stream"))
        streams = self.device.streams
        if not 0 <= stream_no < len(streams):
            raise self.DriverError(f"no stream {stream_no} (streams: {self.target.streams})")
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
            raise self.DriverError(f"inject target {kind} is not 0, 1 or 2")
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
