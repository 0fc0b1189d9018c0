"""Stand-in for `triton.language` (`tl.constexpr` in signatures, dtype names)."""

from kvsim.sglang_target.dummy import fallback_getattr

__path__ = []


class constexpr:  # noqa: N801 - triton's name
    def __init__(self, value=None):
        self.value = value


__getattr__ = fallback_getattr(__name__, globals())
