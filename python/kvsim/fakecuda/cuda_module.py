"""The fake device's ``torch.cuda``: the names SGLang's cache code calls, nothing more."""

import contextlib
import types

import torch

from .streams import CUDA0


class _Properties:
    def __init__(self, dev):
        self.name = dev.name
        self.total_memory = dev.total_memory
        self.major, self.minor = 9, 0
        self.multi_processor_count = 132
        self.is_integrated = False
        self.is_multi_gpu_board = False

    def __repr__(self):
        return f"_CudaDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB)"


class _CudaRT:
    """cudart(): host registration always succeeds (0 = cudaSuccess); the memory is marked pinned."""

    def __init__(self, dev):
        self._dev = dev
        self.registered = {}  # address -> size

    def cudaHostRegister(self, ptr, size, flags=0):
        self.registered[int(ptr)] = int(size)
        self._dev._mark_pinned_at(int(ptr), True)
        return 0

    def cudaHostUnregister(self, ptr):
        self.registered.pop(int(ptr), None)
        self._dev._mark_pinned_at(int(ptr), False)
        return 0

    def cudaGetErrorString(self, rc):
        return "no error" if int(rc) == 0 else f"fake cuda error {int(rc)}"

    def cudaProfilerStart(self):
        return 0

    def cudaProfilerStop(self):
        return 0


def make_module(dev):
    m = types.ModuleType("torch.cuda", "kvsim.fakecuda: the fake device's torch.cuda")
    m.Stream = dev.Stream
    m.Event = dev.Event
    m.fake_device = dev

    @contextlib.contextmanager
    def stream(s):
        """torch.cuda.stream(s): makes ``s`` current inside the block (None: no change). Like
        torch's StreamContext, ``with torch.cuda.stream(s) as x`` gives x = None."""
        if s is None:
            yield None
            return
        previous = dev.current_stream
        dev.set_current_stream(s)
        try:
            yield None
        finally:
            dev.set_current_stream(previous)

    m.stream = stream
    m.StreamContext = stream
    m.current_stream = lambda device=None: dev.current_stream
    m.default_stream = lambda device=None: dev.default_stream
    m.set_stream = dev.set_current_stream

    def synchronize(device=None):
        dev.drain()

    m.synchronize = synchronize
    m.is_available = lambda: True
    m.is_initialized = lambda: True
    m.init = lambda: None
    m._lazy_init = lambda: None
    m.device_count = lambda: 1
    m.current_device = lambda: 0

    def set_device(device):
        from .tensor import parse_device
        if isinstance(device, int) and device != 0 or parse_device(device) != "cuda":
            raise RuntimeError(f"CUDA error: invalid device ordinal ({device})")

    m.set_device = set_device

    @contextlib.contextmanager
    def device(d):
        set_device(d if d is not None else 0)
        yield

    m.device = device
    m.get_device_name = lambda device=None: dev.name
    m.get_device_properties = lambda device=None: _Properties(dev)
    m.get_device_capability = lambda device=None: (9, 0)

    def mem_get_info(device=None):
        used = dev.allocator.allocated_bytes
        return (max(dev.total_memory - used, 0), dev.total_memory)

    m.mem_get_info = mem_get_info
    m.memory_allocated = lambda device=None: dev.allocator.allocated_bytes
    m.memory_reserved = lambda device=None: dev.allocator.allocated_bytes
    m.max_memory_allocated = lambda device=None: dev.allocator.allocated_bytes
    m.reset_peak_memory_stats = lambda device=None: None
    m.empty_cache = lambda: None
    m.ipc_collect = lambda: None
    rt = _CudaRT(dev)
    m.cudart = lambda: rt

    def manual_seed(seed):
        dev.generator.manual_seed(int(seed))

    m.manual_seed = manual_seed
    m.manual_seed_all = manual_seed
    m.nvtx = types.SimpleNamespace(range_push=lambda *a, **k: 0, range_pop=lambda: 0,
                                   range=contextlib.nullcontext, mark=lambda *a, **k: None)
    m.device_type = "cuda"
    m.default_device = CUDA0
    m.__name__ = "torch.cuda"
    return m
