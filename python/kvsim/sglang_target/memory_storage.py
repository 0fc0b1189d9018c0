"""kvsim's in-memory storage backend for SGLang's HiCache (the L3 tier), plugged in through
SGLang's own "dynamic" backend factory (extra_config module_path / class_name).

`KvsimMemoryStorage` is built on first use as a subclass of the loaded SGLang tree's
`HiCacheStorage` (the factory checks issubclass against that class). Pages are kept in insertion
order (deterministic) with their size and a checksum, as kvsim's core store keeps them; a page
whose size or checksum no longer matches is removed and read as a miss (the backend validates,
SGLang's generic page path does not). `capacity_bytes` > 0 evicts least recently used pages.

kvsim's storage faults (sim/model/storage_faults.h) are armed for one storage step by the
driver: read faults hit the next get(), write faults the next set()."""

import collections
import sys
import zlib

import torch

READ_FAULTS = ("read_error", "vanish", "corrupt", "wrong_size")
WRITE_FAULTS = ("write_error", "torn_write")
FAULTS = READ_FAULTS + WRITE_FAULTS + ("slow_io",)

_classes = {}


def _checksum(t):
    with torch._C.DisableTorchFunction():
        raw = t.as_subclass(torch.Tensor).contiguous().view(torch.uint8).numpy().tobytes()
    return zlib.crc32(raw)


class _Store:
    """Methods of the backend (copied onto the era's HiCacheStorage subclass)."""

    def __init__(self, storage_config=None, kwargs=None):
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        self.capacity_bytes = int(extra.get("kvsim_capacity_bytes", 0) or 0)
        self.pages = collections.OrderedDict()  # key -> [tensor, numel, checksum]
        self.bytes = 0
        self.armed = None
        self.applied = []  # faults that met a get/set, in order
        self.counts = collections.Counter()

    # -- faults ------------------------------------------------------------------------------
    def arm(self, fault):
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown storage fault {fault!r} (known: {', '.join(FAULTS)})")
        self.armed = fault

    def _take(self, kinds):
        if self.armed in kinds:
            fault, self.armed = self.armed, None
            self.applied.append(fault)
            return fault
        return None

    # -- store -------------------------------------------------------------------------------
    def _remove(self, key):
        entry = self.pages.pop(key, None)
        if entry is not None:
            self.bytes -= entry[0].numel() * entry[0].element_size()

    def get(self, key, target_location=None, target_sizes=None):
        fault = self._take(READ_FAULTS)
        entry = self.pages.get(key)
        if fault == "read_error":
            self.counts["get_io_error"] += 1
            return None
        if fault == "vanish":
            self._remove(key)
            entry = None
        if entry is None:
            self.counts["get_miss"] += 1
            return None
        data, numel, crc = entry
        if fault == "corrupt":
            with torch._C.DisableTorchFunction():
                data.view(torch.uint8)[0] ^= 0xFF
        if fault == "wrong_size":
            data = data[:-1]
        if data.numel() != numel or _checksum(data) != crc:
            self.counts["get_corrupt"] += 1
            self._remove(key)
            return None
        self.pages.move_to_end(key)
        self.counts["get_ok"] += 1
        if target_location is not None:
            if target_location.numel() != numel:
                self.counts["get_corrupt"] += 1
                return None
            target_location.reshape(-1).copy_(data.reshape(-1).to(target_location.dtype))
            return target_location
        return data.clone()

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        targets = target_locations or [None] * len(keys)
        return [self.get(k, t) for k, t in zip(keys, targets)]

    def set(self, key, value=None, target_location=None, target_sizes=None):
        fault = self._take(WRITE_FAULTS)
        if fault == "write_error":
            self.counts["set_failed"] += 1
            return False
        if key in self.pages and fault is None:
            self.pages.move_to_end(key)
            self.counts["set_ok"] += 1
            return True
        with torch._C.DisableTorchFunction():
            data = value.as_subclass(torch.Tensor).detach().reshape(-1).clone()
        numel, crc = data.numel(), _checksum(data)
        if fault == "torn_write":
            data = data[: max(numel // 2, 0)].clone()  # cut short after set() reported success
        self._remove(key)
        size = data.numel() * data.element_size()
        if self.capacity_bytes:
            while self.pages and self.bytes + size > self.capacity_bytes:
                self._remove(next(iter(self.pages)))
            if size > self.capacity_bytes:
                self.counts["set_failed"] += 1
                return False
        self.pages[key] = [data, numel, crc]
        self.bytes += size
        self.counts["set_ok"] += 1
        return True

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        for k, v in zip(keys, values):
            if not self.set(k, v):
                return False
        return True

    def exists(self, key):
        return key in self.pages

    def clear(self):
        self.pages.clear()
        self.bytes = 0
        return True

    def get_stats(self):
        return None


def memory_storage_class(base):
    """A subclass of `base` (an SGLang era's HiCacheStorage) with the store's methods."""
    cls = _classes.get(base)
    if cls is None:
        methods = {k: v for k, v in vars(_Store).items() if not k.startswith("__") or k == "__init__"}
        cls = type("KvsimMemoryStorage", (base,), methods)
        _classes[base] = cls
    return cls


def __getattr__(name):
    # SGLang's dynamic factory does getattr(module, class_name): the class of the loaded tree.
    if name == "KvsimMemoryStorage":
        hs = sys.modules.get("sglang.srt.mem_cache.hicache_storage")
        if hs is None:
            raise AttributeError("KvsimMemoryStorage needs SGLang's hicache_storage loaded")
        return memory_storage_class(hs.HiCacheStorage)
    raise AttributeError(name)
