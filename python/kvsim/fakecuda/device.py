"""FakeDevice: one deterministic fake GPU (streams, events, memory, violations)."""

import bisect
import weakref

import torch

from . import _state
from .clock import LogicalClock
from .memory import Allocator, poison, raw_alias
from .streams import FakeEvent, FakeStream, Op
from .tensor import DeviceTensor, is_device, plain, to_device_tensor
from .violation import Violation

_DisableTF = torch._C.DisableTorchFunction
_TB = torch._C._TensorBase


class FakeDevice:
    """One fake GPU. ``dev.module`` is its ``torch.cuda``; ``dev.install()`` patches torch to use it.

    Streams other than the default one are queues that only ``step``/``drain`` (or a host-side wait:
    ``Event.synchronize``, ``Stream.synchronize``, a wait by the default stream) advance."""

    def __init__(self, clock=None, seed=0, total_memory=80 * 2**30, name="kvsim fake CUDA device"):
        self.clock = clock if clock is not None else LogicalClock()
        self.seed = int(seed)
        self.generator = torch.Generator().manual_seed(self.seed)  # the device's own RNG
        self.violations = []
        self.streams = []
        self.total_memory = int(total_memory)
        self.name = name
        self.allocator = Allocator(self)
        self._op_seq = 0
        self._memory = []  # sorted (start, end, weakref to a tensor over the storage) for pointer lookup
        self.Stream = type("Stream", (FakeStream,), {"_dev": self})
        self.Event = type("Event", (FakeEvent,), {"_dev": self})
        self.default_stream = self.Stream()
        self.current_stream = self.default_stream
        from .cuda_module import make_module
        self.module = make_module(self)
        self._installer = None
        _state.ACTIVE[0] = self

    def reseed(self, seed):
        """The seed a fresh device would have been made with (a driver forked from a server
        that made this device before knowing the run's seed)."""
        self.seed = int(seed)
        self.generator = torch.Generator().manual_seed(self.seed)

    # ---- reports -------------------------------------------------------------------------------
    def _report(self, kind, detail):
        self.violations.append(Violation(kind, detail))

    def check_residency(self, obj, expect="host", what="value"):
        """None when ``obj`` (a tensor, or a list/tuple of them) is on ``expect`` ("host" or
        "device"), else a message naming ``what``."""
        if expect not in ("host", "device"):
            raise ValueError(f"expect must be 'host' or 'device', got {expect!r}")
        if isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                msg = self.check_residency(x, expect, f"{what}[{i}]")
                if msg:
                    return msg
            return None
        if not isinstance(obj, torch.Tensor):
            return f"{what} is {type(obj).__name__}, not a tensor"
        on = "device" if is_device(obj) else "host"
        if on != expect:
            return f"{what} is a {on} tensor ({tuple(obj.shape)} {obj.dtype}), expected a {expect} tensor"
        return None

    # ---- streams -------------------------------------------------------------------------------
    def set_current_stream(self, stream):
        if stream is None:
            stream = self.default_stream
        if not isinstance(stream, FakeStream) or stream._dev is not self:
            raise TypeError(f"not a stream of this fake device: {stream!r}")
        self.current_stream = stream

    def pending(self, stream):
        return len(stream.queue)

    def runnable(self, stream):
        if not stream.queue:
            return False
        head = stream.queue[0]
        return head.wait_stream is None or head.wait_stream.completed >= head.wait_pos

    def step(self, stream, n=1):
        """Runs up to ``n`` ops at the head of ``stream``; stops at a wait not yet satisfied.
        Returns the number of ops run (a satisfied wait counts as one)."""
        ran = 0
        while ran < n and self.runnable(stream):
            self._run_head(stream)
            ran += 1
        return ran

    def drain(self):
        """Runs every queued op: streams in creation order, each as far as it can go, until none
        is left. Returns the number of ops run."""
        total = 0
        while True:
            progress = 0
            for s in self.streams:
                progress += self.step(s, len(s.queue))
            total += progress
            if not any(s.queue for s in self.streams):
                return total
            if progress == 0:  # cannot happen: waits are on positions already submitted
                raise RuntimeError(f"fake device deadlock: {self.streams}")

    def _run_head(self, stream):
        op = stream.queue.popleft()
        try:
            if op.fn is not None:
                op.fn(*op.args)
        finally:
            stream.completed += 1
            for block, _mode in op.uses:
                self.allocator.release(block, op)

    def _advance_to(self, stream, position):
        """Host-side wait: runs ``stream`` (and what it waits on) until ``position`` completes."""
        while stream.completed < position:
            head = stream.queue[0]
            if head.wait_stream is not None and head.wait_stream.completed < head.wait_pos:
                self._advance_to(head.wait_stream, head.wait_pos)
            self._run_head(stream)

    def _wait_event(self, stream, event):
        if event.stream is None:
            self._report("event", f"{stream.name}.wait_event on an event that was never recorded "
                                  "(a no-op on CUDA: nothing is ordered)")
            return
        if event.stream is stream or event.query():
            return
        if stream.is_default:
            # The default stream runs eagerly: its next op may start only after the event, so the
            # device runs the event's stream up to it now.
            self._advance_to(event.stream, event.position)
            return
        self._op_seq += 1
        stream.queue.append(Op(self._op_seq, f"wait({event.stream.name}@{event.position})",
                               wait_stream=event.stream, wait_pos=event.position))
        stream.submitted += 1

    # ---- work ----------------------------------------------------------------------------------
    def submit(self, fn, reads=(), writes=(), name=""):
        """Enqueues ``fn`` on the current stream; it runs as ``fn(*reads, *writes)`` with plain
        (host-typed) tensors over the same memory when the stream reaches it. ``reads``/``writes``
        hold tensors or lists/tuples of tensors (other values pass through). ``fn`` must not capture
        tensors itself: a kernel holds pointers, not references, and a captured tensor would keep
        its memory alive where the GPU's would be reused."""
        _check_no_captured_tensors(fn, name)
        stream = self.current_stream
        self._op_seq += 1
        op = Op(self._op_seq, name or getattr(fn, "__name__", "op"), fn)
        if stream.is_default:
            op.args = tuple(_raw_args(x) for x in tuple(reads) + tuple(writes))
            stream.submitted += 1
            stream.queue.append(op)
            self._run_head(stream)
            return op
        uses = []
        args = []
        for mode, group in (("reads", reads), ("writes", writes)):
            for x in group:
                args.append(self._track(x, op, stream, mode, uses))
        op.args = tuple(args)
        op.uses = tuple(uses)
        stream.queue.append(op)
        stream.submitted += 1
        return op

    def _track(self, x, op, stream, mode, uses):
        if isinstance(x, torch.Tensor):
            if is_device(x) or _is_pinned_host(x):
                block = self.allocator.use(x, op, stream, mode)
                uses.append((block, mode))
            return raw_alias(x)
        if isinstance(x, (list, tuple)):
            return type(x)(self._track(y, op, stream, mode, uses) for y in x)
        return x

    def record_stream(self, t, stream):
        if not isinstance(stream, FakeStream) or stream._dev is not self:
            raise TypeError(f"record_stream(): expected a stream of this fake device, got {stream!r}")
        self.allocator.record_stream(t, stream)

    # ---- allocation & transfers ----------------------------------------------------------------
    def adopt_new(self, plain_tensor):
        """A fresh plain tensor becomes a device allocation on the current stream."""
        out = to_device_tensor(plain_tensor, self.current_stream)
        self.allocator.block_of(out)
        return out

    def adopt_pinned(self, t):
        t._fc_pinned = True
        self.allocator.adopt(t, self.current_stream, pinned=True)
        return t

    def empty(self, *size, dtype=None):
        """A device tensor (test helper; under install, torch.empty(..., device='cuda') does this)."""
        with _DisableTF():
            return self.adopt_new(torch.empty(*size, dtype=dtype))

    def tensor(self, data, dtype=None):
        with _DisableTF():
            return self.adopt_new(torch.tensor(data, dtype=dtype))

    def copy_(self, dst, src, non_blocking=False):
        """dst.copy_(src) where either side may be on the device: queued on a side stream."""
        if isinstance(src, (int, float, bool)):
            with _DisableTF():
                _TB.fill_(plain(dst), src)
            return dst
        stream = self.current_stream
        if stream.is_default:
            with _DisableTF():
                _TB.copy_(plain(dst), plain(src))
            return dst
        if not is_device(src) and not _is_pinned_host(src):
            with _DisableTF():  # pageable host memory: staged at the call, as cudaMemcpyAsync does
                src = _TB.clone(src)
        if _is_pinned_host(src):  # the host caching allocator records the copy's stream itself
            self.allocator.record_stream(src, stream)
        if _is_pinned_host(dst):
            self.allocator.record_stream(dst, stream)
        self.submit(_copy_kernel, reads=(src,), writes=(dst,), name="copy_")
        return dst

    def copy_to_device(self, src, dtype=None, non_blocking=False):
        with _DisableTF():
            fresh = torch.empty_like(plain(src), dtype=dtype or src.dtype)
        out = self.adopt_new(fresh)
        self.copy_(out, src, non_blocking=non_blocking)
        return out

    def copy_to_host(self, src, dtype=None, non_blocking=False):
        """A device->host copy: a synchronous copy waits for the current stream first. A
        non_blocking one returns pinned memory, as torch 2.x does (recorded on a GPU,
        tools/cuda_truth); on a side stream the copy is queued there and the result holds poison
        until the stream runs it (on a GPU: whatever was there), so reading it before a sync shows."""
        stream = self.current_stream
        if non_blocking:
            with _DisableTF():
                out = _TB.new_empty(plain(src), src.shape, dtype=dtype or src.dtype)
            self.adopt_pinned(out)
            if stream.is_default:
                with _DisableTF():
                    _TB.copy_(out, plain(src))
            else:
                poison(out)
                self.copy_(out, src, non_blocking=True)
            return out
        if not stream.is_default:
            self._advance_to(stream, stream.submitted)
        with _DisableTF():
            return _TB.to(plain(src), dtype=dtype or src.dtype, copy=True)

    # ---- memory registry for kernels' pointer tables -------------------------------------------
    def register_memory(self, t):
        """Makes the storage of ``t`` resolvable from an address (what ``data_ptr()`` hands out)."""
        with _DisableTF():
            st = t.storage()
            start = st.data_ptr()
            end = start + st.nbytes()
        base = _TB._base.__get__(t)
        root = t if base is None else base  # views die young; their base holds the storage
        i = bisect.bisect_left(self._memory, (start,))
        while i < len(self._memory) and self._memory[i][0] == start:
            if self._memory[i][2]() is not None and self._memory[i][1] == end:
                return
            del self._memory[i]
        self._memory.insert(i, (start, end, weakref.ref(root)))

    def resolve(self, address, nbytes=1):
        """(plain uint8 tensor over the storage that holds [address, address+nbytes), offset) or None."""
        i = bisect.bisect_right(self._memory, (address, float("inf"))) - 1
        while i >= 0:
            start, end, ref = self._memory[i]
            t = ref()
            if t is not None and start <= address and address + nbytes <= end:
                with _DisableTF():
                    st = t.storage()
                    flat = torch.empty(0, dtype=torch.uint8).set_(
                        torch.storage.TypedStorage(wrap_storage=st._storage, dtype=torch.uint8))
                return flat, address - start
            if end <= address and t is not None:
                return None
            i -= 1
        return None

    def _mark_pinned_at(self, address, pinned):
        """cudaHostRegister/Unregister: the host tensor whose storage starts at ``address``."""
        for start, _end, ref in self._memory:
            t = ref()
            if start == address and t is not None and not is_device(t):
                base = _TB._base.__get__(t)
                root = t if base is None else base
                if pinned:
                    root._fc_pinned = True
                else:
                    root.__dict__.pop("_fc_pinned", None)

    # ---- install ---------------------------------------------------------------------------------
    def install(self):
        from .install import Installer
        if self._installer is not None:
            raise RuntimeError("this FakeDevice is already installed")
        self._installer = Installer(self)
        self._installer.apply()
        _state.ACTIVE[0] = self
        return self._installer

    def uninstall(self):
        if self._installer is not None:
            inst, self._installer = self._installer, None
            inst.restore()


def _copy_kernel(src, dst):
    dst.copy_(src)


def _is_pinned_host(t):
    if type(t) is DeviceTensor:
        return False
    base = _TB._base.__get__(t)
    root = t if base is None else base
    return root.__dict__.get("_fc_pinned", False)


def _raw_args(x):
    if isinstance(x, torch.Tensor):
        return plain(x) if is_device(x) else x
    if isinstance(x, (list, tuple)):
        return type(x)(_raw_args(y) for y in x)
    return x


def _check_no_captured_tensors(fn, name):
    cells = getattr(fn, "__closure__", None) or ()
    for c in cells:
        try:
            v = c.cell_contents
        except ValueError:
            continue
        if isinstance(v, torch.Tensor):
            raise ValueError(f"submit({name or fn}): fn captures a tensor; pass it in reads/writes "
                             "so the lifetime model sees it")
