"""Stand-in for sglang.srt.mem_cache.storage.mmap: host buffers as zeroed CPU tensors (no mmap,
no hugepages, no shared memory), so a host pool's initial bytes are deterministic."""

import math

import torch


def alloc_mmap(dims, dtype):
    return torch.zeros(math.prod(dims), dtype=dtype).view(*dims)


def alloc_shm(dims, dtype, *_args, **_kwargs):
    return alloc_mmap(dims, dtype)


__all__ = ["alloc_mmap", "alloc_shm"]
