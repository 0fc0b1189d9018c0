"""A logical clock that stands in for wall time in the code under test.

SGLang's tree and controller read ``time.monotonic()`` / ``time.time()`` / ``time.perf_counter()`` for
LRU order and timeouts; under the simulator those must be a function of the op sequence only, so
they read this clock, which moves only when the simulator (or a stand-in ``sleep``) advances it.
"""

import types


class LogicalClock:
    """Seconds as a float that only ``advance``/``set`` (and ``time_module.sleep``) move.

    Every read also adds ``tick`` (default 0): with a positive tick, successive reads are strictly
    increasing, which code that orders by timestamp may need to keep distinct entries apart."""

    def __init__(self, start=0.0, tick=0.0, epoch=1.7e9):
        if tick < 0:
            raise ValueError(f"LogicalClock tick must be >= 0, got {tick}")
        self._now = float(start)
        self._tick = float(tick)
        self._epoch = float(epoch)  # time.time() = epoch + now: a plausible wall-clock value
        self.time_module = self._make_time_module()

    def _read(self):
        value = self._now
        self._now += self._tick
        return value

    def monotonic(self):
        return self._read()

    def perf_counter(self):
        return self._read()

    def time(self):
        return self._epoch + self._read()

    def monotonic_ns(self):
        return int(round(self._read() * 1e9))

    def perf_counter_ns(self):
        return int(round(self._read() * 1e9))

    def time_ns(self):
        return int(round((self._epoch + self._read()) * 1e9))

    @property
    def tick(self):
        """Seconds every read adds (0: reads between two advances all see the same time)."""
        return self._tick

    @tick.setter
    def tick(self, seconds):
        if seconds < 0:
            raise ValueError(f"LogicalClock tick must be >= 0, got {seconds}")
        self._tick = float(seconds)

    def now(self):
        """The current logical time without the per-read tick."""
        return self._now

    def advance(self, dt):
        if dt < 0:
            raise ValueError(f"LogicalClock.advance: dt must be >= 0, got {dt}")
        self._now += float(dt)
        return self._now

    def set(self, t):
        if t < self._now:
            raise ValueError(f"LogicalClock.set: time cannot go back ({t} < {self._now})")
        self._now = float(t)
        return self._now

    def sleep(self, seconds):
        """Advances logical time instead of blocking."""
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self._now += float(seconds)

    def _make_time_module(self):
        """A stand-in for the ``time`` module: the clock's functions, the rest from ``time``."""
        import time as real_time

        mod = types.ModuleType("time", "kvsim.fakecuda logical time (stands in for the time module)")
        for name in dir(real_time):
            if not name.startswith("__"):
                setattr(mod, name, getattr(real_time, name))
        for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns",
                     "perf_counter_ns", "sleep"):
            setattr(mod, name, getattr(self, name))
        mod.logical_clock = self
        return mod
