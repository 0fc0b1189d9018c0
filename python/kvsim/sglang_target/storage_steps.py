"""HiCacheController's storage threads, stepped by the simulator instead of run as threads.

SGLang's controller starts its storage workers (`prefetch_thread_func`, which starts
`prefetch_io_aux_func`, and `backup_thread_func`) with `threading.Thread` and feeds them through
`queue.Queue.get(block=True, timeout=1)`. In the controller module the driver replaces
`threading` with a namespace whose `Thread` never starts (`SteppedThread`) and `Queue` with
`SteppedQueue`, whose blocking `get` hands out at most the items a step allows and otherwise
raises `_Yield` (a BaseException, so the workers' `except Empty` / `except Exception` do not
swallow it): one step runs the worker's own loop body for one queued operation and returns.
Non-blocking reads (the scheduler side's `get_nowait`) are untouched.

Workers (the protocol's `storage` call): 0 the query worker (prefetch_thread_func: the storage hit
query, revoke or hand-over), 1 the prefetch I/O worker (prefetch_io_aux_func: page reads into the
host pool), 2 the backup worker (backup_thread_func: page writes to storage)."""

import queue as _queue
import threading as _threading
import types

WORKERS = ("query", "io", "backup")


class _Yield(BaseException):
    """Raised by a stepped queue's blocking get when the step's budget is spent: ends the step."""


class SteppedQueue(_queue.Queue):
    def __init__(self, maxsize=0):
        super().__init__(maxsize)
        self.allow = 0  # blocking gets this step may still serve

    def get(self, block=True, timeout=None):
        if not block:
            return super().get(block=False)
        if self.allow <= 0 or self.empty():
            raise _Yield()
        self.allow -= 1
        return super().get(block=False)

    def put(self, item, block=True, timeout=None):
        super().put(item, block=False)


class SteppedThread:
    """threading.Thread's surface; start() records, nothing runs on its own."""

    def __init__(self, group=None, target=None, name=None, args=(), kwargs=None, daemon=None):
        self.target, self.args, self.kwargs = target, tuple(args), dict(kwargs or {})
        self.name = name or getattr(target, "__name__", "stepped")
        self.daemon = daemon
        self.started = False

    def start(self):
        self.started = True

    def is_alive(self):
        return False

    def join(self, timeout=None):
        return None


def stepped_threading():
    """A stand-in for the `threading` module: Thread is SteppedThread, the rest is real."""
    ns = types.SimpleNamespace(**{k: getattr(_threading, k) for k in dir(_threading) if not k.startswith("__")})
    ns.Thread = SteppedThread
    return ns


def install(controller_module):
    """Replaces threading/Queue in SGLang's controller module (before HiCacheController is
    built, since attaching a storage backend starts the workers)."""
    if getattr(controller_module, "_kvsim_stepped", False):
        return
    if hasattr(controller_module, "threading"):
        controller_module.threading = stepped_threading()
    if hasattr(controller_module, "Queue"):
        controller_module.Queue = SteppedQueue
    controller_module._kvsim_stepped = True


def _run(fn, q, budget=1):
    """Runs a worker loop until its queue has served `budget` items and asks again."""
    q.allow = budget
    before = q.qsize()
    try:
        fn()
    except _Yield:
        pass
    finally:
        q.allow = 0
    return q.qsize() < before


class StorageStepper:
    """The controller's storage workers, one unit of work per step."""

    def __init__(self, controller):
        self.cc = controller
        self._prime()

    def _prime(self):
        """Runs prefetch_thread_func's preamble once (it builds prefetch_buffer and the I/O
        worker), as the thread's start would."""
        cc = self.cc
        if not hasattr(cc, "prefetch_buffer"):
            _run(cc.prefetch_thread_func, cc.prefetch_queue, budget=0)
        self.buffer = cc.prefetch_buffer

    def step(self, worker):
        cc = self.cc
        if worker == 0:
            # prefetch_thread_func rebuilds prefetch_buffer on entry: keep the one that lives.
            did = _run(cc.prefetch_thread_func, cc.prefetch_queue)
            fresh = cc.prefetch_buffer
            cc.prefetch_buffer = self.buffer
            while not fresh.empty():
                self.buffer.put(fresh.get(block=False))
            return did
        if worker == 1:
            return _run(cc.prefetch_io_aux_func, cc.prefetch_buffer)
        if worker == 2:
            return _run(cc.backup_thread_func, cc.backup_queue)
        raise ValueError(f"storage worker {worker} is not 0 (query), 1 (io) or 2 (backup)")

    def pending(self):
        """(queued prefetch queries, queued prefetch reads, queued backups)."""
        cc = self.cc
        return cc.prefetch_queue.qsize(), cc.prefetch_buffer.qsize(), cc.backup_queue.qsize()
