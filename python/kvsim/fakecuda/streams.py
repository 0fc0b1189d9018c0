"""Streams as FIFO queues the simulator advances; events as positions in them.

A stream's ops get positions 1, 2, ... in submission order; ``completed`` counts the ops that have
run. An event recorded on stream S at a moment when S had ``n`` ops submitted is the position n:
it is complete once S has completed n ops (CUDA: an event completes when all work captured by the
record has completed). The default stream runs every op at submission, so its events are complete
as soon as they are recorded.
"""

import collections

import torch

CUDA0 = torch.device("cuda", 0)


class Op:
    """One queued unit of stream work: a kernel/copy (``fn``) or a wait on another stream's position."""

    __slots__ = ("seq", "name", "fn", "args", "uses", "wait_stream", "wait_pos")

    def __init__(self, seq, name, fn=None, args=(), uses=(), wait_stream=None, wait_pos=0):
        self.seq = seq
        self.name = name
        self.fn = fn
        self.args = args
        self.uses = uses  # ((block, "reads"|"writes"), ...): the lifetime model's bookkeeping
        self.wait_stream = wait_stream
        self.wait_pos = wait_pos

    def __repr__(self):
        return f"Op#{self.seq}({self.name})"


class FakeStream:
    """torch.cuda.Stream stand-in. Subclassed per device (``dev.module.Stream``), so
    ``Stream(device=None, priority=0)`` needs no device argument."""

    _dev = None

    def __init__(self, device=None, priority=0, **kwargs):
        dev = self._dev
        if dev is None:
            raise RuntimeError("use FakeDevice.module.Stream, not FakeStream directly")
        self.device = CUDA0
        self.priority = int(priority)
        self.index = len(dev.streams)
        self.is_default = self.index == 0
        self.name = "default_stream" if self.is_default else f"stream{self.index}"
        self.cuda_stream = 0 if self.is_default else 0x1000 + self.index
        self.stream_id = self.cuda_stream
        self.queue = collections.deque()
        self.submitted = 0
        self.completed = 0
        dev.streams.append(self)

    def __repr__(self):
        return f"<fake {self.name} pending={len(self.queue)} completed={self.completed}>"

    def query(self):
        return self.completed == self.submitted

    def synchronize(self):
        self._dev._advance_to(self, self.submitted)

    def wait_event(self, event):
        self._dev._wait_event(self, event)

    def wait_stream(self, stream):
        event = self._dev.module.Event()
        event.record(stream)
        self.wait_event(event)

    def record_event(self, event=None):
        if event is None:
            event = self._dev.module.Event()
        event.record(self)
        return event

    def __enter__(self):  # `with stream as s`: s is the stream (torch.cuda.stream(...) gives None)
        self._ctx = self._dev.module.stream(self)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


class FakeEvent:
    """torch.cuda.Event stand-in: a position in one stream (set by ``record``)."""

    _dev = None

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = bool(interprocess)
        self.stream = None
        self.position = 0
        self.recorded_at = None  # logical clock time of the record (elapsed_time's basis)

    def __repr__(self):
        where = "unrecorded" if self.stream is None else f"{self.stream.name}@{self.position}"
        return f"<fake Event {where}>"

    @property
    def cuda_event(self):
        return id(self)

    def record(self, stream=None):
        dev = self._dev
        if stream is None:
            stream = dev.current_stream
        self.stream = stream
        self.position = stream.submitted
        self.recorded_at = dev.clock.now()

    def query(self):
        if self.stream is None:
            return True  # cudaEventQuery on an event never recorded reports success
        return self.stream.completed >= self.position

    def synchronize(self):
        if self.stream is None:
            self._dev._report("event", "Event.synchronize() on an event that was never recorded "
                                       "(returns at once on CUDA: nothing is waited for)")
            return
        self._dev._advance_to(self.stream, self.position)

    def wait(self, stream=None):
        if stream is None:
            stream = self._dev.current_stream
        stream.wait_event(self)

    def elapsed_time(self, end_event):
        # ValueError as torch 2.x raises (recorded on a GPU, tools/cuda_truth); torch 1.13 raised RuntimeError
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.stream is None or end_event.stream is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("CUDA error: device not ready")
        return (end_event.recorded_at - self.recorded_at) * 1000.0
