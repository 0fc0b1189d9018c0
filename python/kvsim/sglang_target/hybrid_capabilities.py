"""What the loaded SGLang revision lets the SGLang target build, probed from the code that is
loaded (never read off a commit): the driver reports it at hello and in the fork server's
greeting, and the simulator turns off in each drawn unit only what the revision cannot run
(sim/campaign/target_fit.cpp).

Components (each True or False):
- swa: UnifiedRadixCache with FULL + SWA and HiCache where SGLang's assembler has an SWA stack
  (the May 2026 unified_cache_components tree and the August 2026 unified_cache/ tree core,
  unified_tree.py); HiCache only, no storage tier, not beside Mamba (hybrid.py);
- mamba: FULL + Mamba with HiCache through HiMambaRadixCache (mamba.py: page_size 1, HiCache
  only, no storage tier, nothing beside it; admission as SGLang's, mamba_admission.py), offered to
  the hunt where SGLang's MambaPoolHost takes at least one host layout the swarm draws;
- mamba_host_layouts: those host layouts (both, layer_first and page_first, April-May 2026; the
  August 2026 snapshot's MambaPoolHost asserts page-first layouts, so there only page_first, and
  the hunt sets a Mamba unit's host layout to it). A reply without this key (an older driver)
  means both;
- mamba_buildable: HiMambaRadixCache builds, whatever host layouts MambaPoolHost takes;
- pd: PD decode's retract / resume through SGLang's MetadataBuffers (disaggregation/utils.py);
- sparse_index: SGLang's NSA / DSA pool in memory_pool.py.

Not a component: evict_before_alloc, what the scheduler's eviction before an allocation asks of
the tree ("shortfall", "whole" or None: eviction_amounts.py), for kvsim's differential."""

import importlib

MC = "sglang.srt.mem_cache"


def swa_unsupported_reason(mods):
    """None when this revision builds FULL + SWA with HiCache, else why not (the hybrid target's
    refusal names it). Both UnifiedRadixCache layouts are driven (unified_tree.py: the April-May
    2026 unified_cache_components tree and the August 2026 unified_cache/ tree core); what is
    probed is that the loaded era's ComponentType and SWA allocator exist and that SGLang's
    assembler builds an SWA stack."""
    if getattr(mods, "UnifiedRadixCache", None) is None or getattr(mods, "HybridCacheController", None) is None:
        return "this SGLang tree has no UnifiedRadixCache with HybridCacheController"
    from kvsim.sglang_target.hybrid import era_class  # noqa: PLC0415
    from kvsim.sglang_target.target import TargetConfigError  # noqa: PLC0415
    for name in ("ComponentType", "SWATokenToKVPoolAllocator"):
        try:
            era_class(mods, name)
        except TargetConfigError as exc:
            return str(exc)
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
    """{component: bool} and mamba_host_layouts (a list) for the loaded revision (see the module's
    docstring)."""
    from kvsim.sglang_target.eviction_amounts import evict_before_alloc  # noqa: PLC0415
    from kvsim.sglang_target.retract_pool import nsa_class  # noqa: PLC0415
    utils = _module_or_none(mods, "sglang.srt.disaggregation.utils")
    mem_pool = _module_or_none(mods, f"{MC}.memory_pool")
    buildable = _mamba_ok(mods)
    refused = _mamba_host_layouts_refused(mods)
    layouts = [layout for layout in SWARM_HOST_LAYOUTS if layout not in refused] if buildable else []
    return {"swa": swa_unsupported_reason(mods) is None,
            "mamba": bool(layouts),
            "mamba_host_layouts": layouts,
            "mamba_buildable": buildable,
            "pd": utils is not None and isinstance(getattr(utils, "MetadataBuffers", None), type),
            "sparse_index": mem_pool is not None and nsa_class(mem_pool) is not None,
            "evict_before_alloc": evict_before_alloc(mods)}


# The host layouts the swarm draws (sim/campaign/swarm.cpp); each must be one MambaPoolHost takes.
SWARM_HOST_LAYOUTS = ("layer_first", "page_first")


def _mamba_host_layouts_refused(mods):
    """The drawn host layouts this revision's MambaPoolHost refuses, probed by its own check: its
    constructor asserts the layout first ("Unsupported layout"), and a bare instance with no
    device pool fails on anything past that assert, so no pool is built."""
    cls = getattr(_module_or_none(mods, f"{MC}.memory_pool_host"), "MambaPoolHost", None)
    if cls is None:
        return list(SWARM_HOST_LAYOUTS)
    refused = []
    for layout in SWARM_HOST_LAYOUTS:
        try:
            cls.__init__(object.__new__(cls), None, 2.0, 0, layout=layout)
        except AssertionError as exc:
            if "layout" in str(exc).lower():
                refused.append(layout)
        except Exception:  # noqa: BLE001, S110 - past the layout assert: the layout is taken
            pass
    return refused


def _mamba_ok(mods):
    from kvsim.sglang_target.mamba import mamba_unsupported_reason  # noqa: PLC0415
    return mamba_unsupported_reason(mods) is None
