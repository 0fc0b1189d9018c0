"""kvsim: Python binding of kvsim's KV-cache core.

``kvsim.RadixTree`` is the core's radix tree with caller-owned slots (the device tier of an
SGLang-style prefix cache); ``kvsim.sglang`` adapts it to SGLang's ``BasePrefixCache``.
See docs/sglang.md.
"""

from kvsim._core import (  # noqa: F401
    TOKEN_MAX,
    TOKEN_MIN,
    CoreAssertionError,
    KvsimError,
    Lock,
    PoisonedError,
    RadixTree,
)

__version__ = "0.1.0"
__all__ = [
    "RadixTree",
    "Lock",
    "KvsimError",
    "CoreAssertionError",
    "PoisonedError",
    "TOKEN_MIN",
    "TOKEN_MAX",
]
