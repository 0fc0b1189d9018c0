"""kvsim: Python binding of kvsim's KV-cache core.

``kvsim.RadixTree`` is the core's radix tree with caller-owned slots (the device tier of an
SGLang-style prefix cache); ``kvsim.sglang`` adapts it to SGLang's ``BasePrefixCache``.
See docs/sglang.md.
"""

try:  # the binding reads and returns numpy arrays: say so at import, not at the first call
    import numpy as _numpy  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the interpreter
    import sys as _sys

    raise ImportError(
        "kvsim needs numpy, which this Python (%s) does not have: install it (pip install "
        "numpy, or Debian's python3-numpy) or use the interpreter kvsim was built for "
        "(/usr/bin/python3 on Debian)" % _sys.executable
    ) from _e

from kvsim._core import (  # noqa: F401
    TOKEN_MAX,
    TOKEN_MIN,
    CoreAssertionError,
    KvsimError,
    Lock,
    PoisonedError,
    RadixTree,
)

import atexit as _atexit
import signal as _signal

from kvsim._core import _close_recordings, _flush_recordings

__version__ = "0.1.0"

# Recordings (RadixTree(record=...) or KVSIM_RECORD=DIR) end with their footer at exit.
_atexit.register(_close_recordings)


def flush_recordings() -> None:
    """Writes every open recording's buffered calls to its file."""
    _flush_recordings()


def install_signal_flush(signals=(_signal.SIGTERM,)) -> None:
    """Opt-in: on these signals, end every open recording, then run the previous handler (or
    the default action). Call it after the server has installed its own handlers."""
    for sig in signals:
        previous = _signal.getsignal(sig)

        def handler(signum, frame, _previous=previous):
            _close_recordings()
            if callable(_previous):
                _previous(signum, frame)
            elif _previous != _signal.SIG_IGN:
                _signal.signal(signum, _signal.SIG_DFL)
                _signal.raise_signal(signum)

        _signal.signal(sig, handler)
__all__ = [
    "RadixTree",
    "Lock",
    "KvsimError",
    "CoreAssertionError",
    "PoisonedError",
    "TOKEN_MIN",
    "TOKEN_MAX",
    "flush_recordings",
    "install_signal_flush",
]
