"""SGLang's module layout per era. An era is chosen by probing which files a tree has, never by
commit. Each era names where the classes a driver needs live, which modules must import for the
load to count (`required`), which are tried and reported when they fail (`optional`), and the
module prefixes of SGLang's transfer kernels (served by the kernels stand-in)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Tuple

MC = "sglang.srt.mem_cache"


@dataclasses.dataclass(frozen=True)
class Era:
    name: str
    description: str
    probe: Callable[[str], bool]  # package_dir (.../sglang) -> does this era's layout match
    symbols: Dict[str, Tuple[str, ...]]  # SglangModules attribute -> modules to look in, in order
    required: Tuple[str, ...]
    optional: Tuple[str, ...]
    kernel_prefixes: Tuple[str, ...]


def _has(pkg_dir: str, rel: str) -> bool:
    return os.path.exists(os.path.join(pkg_dir, *rel.split("/")))


_COMMON_SYMBOLS = {
    "HiRadixCache": (f"{MC}.hiradix_cache",),
    "RadixCache": (f"{MC}.radix_cache",),
    "HiCacheController": ("sglang.srt.managers.cache_controller",),
    "CacheInitParams": (f"{MC}.cache_init_params",),
    "UnifiedRadixCache": (f"{MC}.unified_radix_cache",),
    "HybridCacheController": (f"{MC}.hybrid_cache.hybrid_cache_controller",),
    "MetadataBuffers": ("sglang.srt.disaggregation.utils",),
    "HiCacheStorage": (f"{MC}.hicache_storage",),
    "HiCacheFile": (f"{MC}.hicache_storage",),
    "HiMambaRadixCache": (f"{MC}.hi_mamba_radix_cache",),
    "MHATokenToKVPool": (f"{MC}.memory_pool",),
    "MLATokenToKVPool": (f"{MC}.memory_pool",),
    "ReqToTokenPool": (f"{MC}.memory_pool",),
    "MambaPoolHost": (f"{MC}.memory_pool_host",),
    "HostPoolGroup": (f"{MC}.memory_pool_host",),
}

_COMMON_OPTIONAL = (
    f"{MC}.cache_init_params",
    f"{MC}.hicache_storage",
    f"{MC}.memory_pool",
    f"{MC}.unified_radix_cache",
    f"{MC}.hybrid_cache.hybrid_cache_controller",
    f"{MC}.hi_mamba_radix_cache",
    "sglang.srt.disaggregation.utils",
    "sglang.srt.managers.io_struct",
    "sglang.srt.server_args",
)

# April - May 2026 (seeds 000-004): one allocator.py, one memory_pool_host.py, JIT kernels under
# sglang.jit_kernel, the controller imports sglang.srt.distributed for TP rank/size.
APRIL_2026 = Era(
    name="2026-04",
    description="allocator.py, memory_pool_host.py, sglang.jit_kernel.*, sglang.srt.distributed",
    probe=lambda pkg: _has(pkg, "srt/mem_cache/allocator.py") and _has(pkg, "srt/mem_cache/memory_pool_host.py")
    and not _has(pkg, "srt/mem_cache/pool_host"),
    symbols={
        **_COMMON_SYMBOLS,
        "HostKVCache": (f"{MC}.memory_pool_host",),
        "MHATokenToKVPoolHost": (f"{MC}.memory_pool_host",),
        "MLATokenToKVPoolHost": (f"{MC}.memory_pool_host",),
        "TokenToKVPoolAllocator": (f"{MC}.allocator",),
        "PagedTokenToKVPoolAllocator": (f"{MC}.allocator",),
        "SWATokenToKVPoolAllocator": (f"{MC}.swa_memory_pool",),
        "ComponentType": (f"{MC}.unified_cache_components",),
    },
    required=(f"{MC}.radix_cache", f"{MC}.allocator", f"{MC}.memory_pool_host",
              "sglang.srt.managers.cache_controller", f"{MC}.hiradix_cache"),
    optional=_COMMON_OPTIONAL,
    kernel_prefixes=("sgl_kernel", "sglang.jit_kernel"),
)

# August 2026 on: allocator/ and pool_host/ packages, kernels under sglang.kernels.ops, runtime
# context (get_parallel) instead of sglang.srt.distributed in the controller.
AUGUST_2026 = Era(
    name="2026-08",
    description="allocator/, pool_host/, sglang.kernels.ops.*, sglang.srt.runtime_context",
    probe=lambda pkg: _has(pkg, "srt/mem_cache/allocator/__init__.py") and _has(pkg, "srt/mem_cache/pool_host"),
    symbols={
        **_COMMON_SYMBOLS,
        "HostKVCache": (f"{MC}.pool_host.base",),
        "MHATokenToKVPoolHost": (f"{MC}.pool_host.mha",),
        "MLATokenToKVPoolHost": (f"{MC}.pool_host.mla",),
        "TokenToKVPoolAllocator": (f"{MC}.allocator.token", f"{MC}.allocator"),
        "PagedTokenToKVPoolAllocator": (f"{MC}.allocator.paged", f"{MC}.allocator"),
        "SWATokenToKVPoolAllocator": (f"{MC}.allocator.swa", f"{MC}.swa_memory_pool"),
        "ComponentType": (f"{MC}.unified_cache.component_type",),
    },
    required=(f"{MC}.radix_cache", f"{MC}.allocator", f"{MC}.pool_host.mha", f"{MC}.pool_host.mla",
              "sglang.srt.managers.cache_controller", f"{MC}.hiradix_cache"),
    optional=_COMMON_OPTIONAL + (f"{MC}.memory_pool_host",),
    kernel_prefixes=("sgl_kernel", "sglang.kernels", "sglang.jit_kernel"),
)

ERAS = (APRIL_2026, AUGUST_2026)


class UnknownEra(Exception):
    pass


def detect_era(package_dir: str) -> Era:
    """The era whose layout `package_dir` (the `sglang` package folder) has."""
    matches = [era for era in ERAS if era.probe(package_dir)]
    if len(matches) != 1:
        found = ", ".join(sorted(os.listdir(os.path.join(package_dir, "srt", "mem_cache"))))
        raise UnknownEra(
            f"{package_dir}: SGLang layout matches {len(matches)} known eras "
            f"({', '.join(e.name for e in matches) or 'none'}); kvsim knows "
            + "; ".join(f"{e.name}: {e.description}" for e in ERAS) + f". mem_cache holds: {found}")
    return matches[0]
