"""Stand-in for `triton` (absent here): decorators SGLang applies at import time (`triton.jit`,
`autotune`, `heuristics`) wrap the kernel in one that raises when launched; `triton.language`
answers type names with dummies."""

from kvsim.sglang_target.dummy import StandinUnavailable, fallback_getattr

__path__ = []
__version__ = "0.0.0+kvsim-standin"


class _Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __getitem__(self, grid):
        return self

    def __call__(self, *_args, **_kwargs):
        raise StandinUnavailable(f"kvsim stand-in: triton kernel {self.__name__} is not available "
                                 "(no triton on this machine)")

    def run(self, *args, **kwargs):
        return self(*args, **kwargs)


def jit(fn=None, **_kwargs):
    if fn is None:
        return jit
    return _Kernel(fn)


def _decorator_factory(*_args, **_kwargs):
    return jit


autotune = heuristics = _decorator_factory


class Config:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def cdiv(a, b):
    return -(-a // b)


def next_power_of_2(n):
    return 1 << (n - 1).bit_length() if n > 0 else 1


__getattr__ = fallback_getattr(__name__, globals())
