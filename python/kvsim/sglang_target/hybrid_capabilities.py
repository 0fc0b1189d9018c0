"""What the loaded SGLang revision lets the SGLang target build, probed from the code that is
loaded (never read off a commit): the driver reports it at hello and in the fork server's
greeting, and the simulator turns off in each drawn unit only what the revision cannot run
(sim/campaign/target_fit.cpp).

Components (each True or False):
- swa: UnifiedRadixCache with FULL + SWA and HiCache (the April-August 2026
  unified_cache_components tree whose assembler has an SWA stack); HiCache only, no storage
  tier, not beside Mamba (hybrid.py);
- mamba: FULL + Mamba with HiCache through HiMambaRadixCache (mamba.py: page_size 1, HiCache
  only, no storage tier, nothing beside it);
- pd: PD decode's retract / resume through SGLang's MetadataBuffers (disaggregation/utils.py);
- sparse_index: SGLang's NSA / DSA pool in memory_pool.py."""

import importlib
import os

MC = "sglang.srt.mem_cache"


def swa_unsupported_reason(mods):
    """None when this revision builds FULL + SWA with HiCache, else why not (the hybrid target's
    refusal names it)."""
    if getattr(mods, "UnifiedRadixCache", None) is None or getattr(mods, "HybridCacheController", None) is None:
        return "this SGLang tree has no UnifiedRadixCache with HybridCacheController"
    if not os.path.isdir(os.path.join(mods.source.python_dir, "sglang", "srt", "mem_cache",
                                      "unified_cache_components")):
        return ("this SGLang revision's UnifiedRadixCache is the rewritten tree (unified_cache/, tree_core, "
                "August 2026), which the hybrid target does not drive yet; it drives the April-May 2026 "
                "unified_cache_components tree")
    try:
        assembler = importlib.import_module(f"{MC}.hybrid_cache.hybrid_pool_assembler")
    except Exception as exc:  # noqa: BLE001 - any import failure means: not buildable here
        return f"this SGLang tree's hybrid_pool_assembler does not import ({type(exc).__name__}: {exc})"
    if not hasattr(assembler, "build_hybrid_swa_stack"):
        return "this SGLang revision's attach_hybrid_pool_to_unified_cache has no SWA stack (FULL + Mamba only)"
    return None


def _module_or_none(mods, name):
    try:
        return mods[name]
    except (KeyError, ImportError):
        return None


def capabilities(mods):
    """{component: bool} for the loaded revision (see the module's docstring)."""
    from kvsim.sglang_target.retract_pool import nsa_class  # noqa: PLC0415
    utils = _module_or_none(mods, "sglang.srt.disaggregation.utils")
    mem_pool = _module_or_none(mods, f"{MC}.memory_pool")
    return {"swa": swa_unsupported_reason(mods) is None,
            # FULL + Mamba builds and runs hand-written calls (test_mamba_hicache.py), but drawn
            # units are not offered to the hunt yet: the scheduler model admits requests without
            # SGLang's Mamba-pool admission check (a unit ends in SGLang's "Not enough space for
            # mamba cache"), and at the August snapshot the stack stops at an absent stand-in
            # (runtime_context.publish). `mamba_buildable` says what the revision has.
            "mamba": False,
            "mamba_buildable": _mamba_ok(mods),
            "pd": utils is not None and isinstance(getattr(utils, "MetadataBuffers", None), type),
            "sparse_index": mem_pool is not None and nsa_class(mem_pool) is not None}


def _mamba_ok(mods):
    from kvsim.sglang_target.mamba import mamba_unsupported_reason  # noqa: PLC0415
    return mamba_unsupported_reason(mods) is None
