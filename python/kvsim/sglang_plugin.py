"""SGLang plugin: registers kvsim's core as the radix-cache backend named ``kvsim``.

Declared in SGLang's general plugin group ``sglang.srt.plugins`` (python/pyproject.toml and the
dist-info that ``cmake --install ... --component python`` writes), so SGLang's
``load_plugins()`` calls ``register()`` at start-up; then ``--radix-cache-backend kvsim`` selects
it. ``SGLANG_PLUGINS=kvsim`` restricts SGLang to this plugin. Calling ``register()`` twice is
harmless.
"""

from __future__ import annotations

BACKEND_NAME = "kvsim"


def _factory(ctx):
    """SGLang's RadixCacheFactory: TreeCacheBuildContext -> BasePrefixCache."""
    unsupported = [
        name
        for name in ("enable_hierarchical_cache", "is_hybrid_swa", "is_hybrid_ssm", "is_dsa")
        if getattr(ctx, name, False)
    ]
    if unsupported:
        raise NotImplementedError(
            "kvsim radix-cache backend: device tier of full-attention models only; "
            f"not supported here: {', '.join(unsupported)} (see kvsim docs/sglang.md)"
        )
    from kvsim.sglang import KvsimRadixCache

    return KvsimRadixCache(ctx.params)


def register() -> None:
    """Entry point of ``sglang.srt.plugins``: registers the ``kvsim`` backend."""
    from sglang.srt.mem_cache.registry import (
        get_radix_cache_factory,
        register_radix_cache_backend,
    )

    if get_radix_cache_factory(BACKEND_NAME) is None:
        register_radix_cache_backend(BACKEND_NAME, _factory)
