"""What SGLang's cache modules use of torch >= 2 that Debian's torch 1.13 lacks. Each patch is
applied only when the feature is missing (probed, never by version), and named in the result."""

from __future__ import annotations

import gc

import torch

_applied: list = []
_done = False


def _identity_decorator(fn=None, *_args, **_kwargs):
    if callable(fn):
        return fn
    return lambda f: f


def ensure_torch_features() -> tuple:
    """Applies the missing-feature patches (once per process); returns the names applied."""
    global _done
    if _done:
        return tuple(_applied)
    _done = True
    # Unsigned dtypes (pointer tables): int64-backed aliases keep the bits a pointer needs.
    for name, alias in (("uint64", torch.int64), ("uint32", torch.int32), ("uint16", torch.int16)):
        if not hasattr(torch, name):
            setattr(torch, name, alias)
            _applied.append(f"torch.{name}")
    # fp8 dtypes (torch >= 2.1): SGLang's KV pools compare the pool dtype against them. Distinct
    # one-byte quantized dtypes stand in; no kvsim path creates an fp8 pool.
    for name, alias in (("float8_e5m2", torch.quint8), ("float8_e4m3fn", torch.qint8),
                        ("float8_e4m3fnuz", torch.quint4x2)):
        if not hasattr(torch, name):
            setattr(torch, name, alias)
            _applied.append(f"torch.{name}")
    if not hasattr(torch.float32, "itemsize"):
        # torch.dtype is a C type whose __dict__ is read-only from Python; its real dict is
        # reachable through the mappingproxy's referents.
        type_dict = gc.get_referents(torch.dtype.__dict__)[0]
        type_dict["itemsize"] = property(lambda dt: torch.empty((), dtype=dt).element_size())
        _applied.append("torch.dtype.itemsize")
    if not hasattr(torch, "compile"):
        torch.compile = _identity_decorator
        _applied.append("torch.compile")
    import torch.cuda.memory as cuda_memory  # noqa: PLC0415

    if not hasattr(cuda_memory, "CUDAPluggableAllocator"):
        # Imported at module level by SGLang's VMM-backed pools (2026-08); never constructed on
        # the paths kvsim drives.
        class CUDAPluggableAllocator:
            def __init__(self, *args, **kwargs):
                raise RuntimeError("kvsim: torch.cuda.memory.CUDAPluggableAllocator needs torch >= 2")

        cuda_memory.CUDAPluggableAllocator = CUDAPluggableAllocator
        _applied.append("torch.cuda.memory.CUDAPluggableAllocator")
    dist = torch.distributed
    if dist.is_available() and not hasattr(dist, "get_process_group_ranks"):
        from torch.distributed import distributed_c10d as c10d

        def get_process_group_ranks(group):
            return [c10d._get_global_rank(group, i) if group not in (None, c10d.GroupMember.WORLD) else i
                    for i in range(dist.get_world_size(group))]

        dist.get_process_group_ranks = get_process_group_ranks
        _applied.append("torch.distributed.get_process_group_ranks")
    return tuple(_applied)
