"""kvsim's SGLang target: SGLang's own cache code (HiRadixCache, HiCacheController, host pools,
...) imported unmodified from an SGLang source tree, with stand-ins for what a cache does not
need. See docs/sglang-hunt.md.

    mods = load_sglang("sglang-27659ea8c8", device=fake_device)   # or a checkout path
    cache = mods.HiRadixCache(...)
    mods.unload()
"""

from kvsim.sglang_target.dummy import StandinUnavailable, is_dummy
from kvsim.sglang_target.eras import ERAS, Era, UnknownEra, detect_era
from kvsim.sglang_target.loader import (
    LoadContext,
    SglangLoadError,
    SglangModules,
    active,
    load_sglang,
    unload,
)
from kvsim.sglang_target.source import (
    SglangSource,
    SglangSourceError,
    bundle_tags,
    default_bundle_path,
    default_cache_dir,
    resolve_source,
)

__all__ = [
    "ERAS", "Era", "LoadContext", "SglangLoadError", "SglangModules", "SglangSource",
    "SglangSourceError", "StandinUnavailable", "UnknownEra", "active", "bundle_tags", "default_bundle_path",
    "default_cache_dir", "detect_era", "is_dummy", "load_sglang", "resolve_source", "unload",
]
