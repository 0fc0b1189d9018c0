"""Stand-in for sglang.srt.platforms: the current platform is CUDA (kvsim's fake device)."""

from kvsim.sglang_target.dummy import fallback_getattr

_ctx = _kvsim_load  # noqa: F821 - injected by the loader
__path__ = []
current_platform = _ctx.platform

__getattr__ = fallback_getattr(__name__, globals())
