"""Stand-in for sglang.srt.utils (and sglang.srt.utils.common): device probes say CUDA so SGLang's
CUDA paths run on kvsim's fake device; env helpers read os.environ as SGLang's do."""

import functools
import os

import torch

from kvsim.sglang_target.dummy import fallback_getattr

_ctx = _kvsim_load  # noqa: F821 - injected by the loader
__path__ = []  # a package: sglang.srt.utils.<x> resolve through the loader


def get_device_module():
    return _ctx.device_module


def is_cuda():
    return True


def is_cuda_alike():
    return True


def _false(*_args, **_kwargs):
    return False


is_hip = is_npu = is_xpu = is_cpu = is_mps = is_musa = is_hpu = is_blackwell = _false
is_sm90_supported = is_sm100_supported = cpu_has_amx_support = use_intel_amx_backend = _false
support_triton = _false
is_float4_e2m1fn_x2 = _false


def is_pin_memory_available():
    return True


_TRUE = ("true", "1", "yes", "y", "on")


def get_bool_env_var(name, default="false"):
    return os.environ.get(name, default).strip().lower() in _TRUE


def get_int_env_var(name, default=0):
    value = os.environ.get(name)
    return default if value is None or not value.strip() else int(value)


def get_float_env_var(name, default=0.0):
    value = os.environ.get(name)
    return default if value is None or not value.strip() else float(value)


def get_str_env_var(name, default=""):
    return os.environ.get(name, default)


def next_power_of_2(n):
    return 1 << (n - 1).bit_length() if n > 0 else 1


def ceil_div(a, b):
    return -(-a // b)


def ceil_align(x, align):
    return ceil_div(x, align) * align


def get_num_new_pages(seq_lens, page_size, prefix_lens=None, decode=False):
    # Used by allocators only when SGLang's own kernels are absent; kept exact in plain torch.
    if prefix_lens is None:
        prefix_lens = seq_lens - 1 if decode else torch.zeros_like(seq_lens)
    new = (seq_lens + page_size - 1) // page_size - (prefix_lens + page_size - 1) // page_size
    return int(new.sum().item())


def get_compiler_backend(*_args, **_kwargs):
    return "inductor"


def human_readable_int(n):
    return str(n)


def get_available_gpu_memory(*_args, **_kwargs):
    return 80.0  # GiB, as the real helper reports


def get_device_memory_capacity(*_args, **_kwargs):
    return 80 * 1024.0


def lru_cache_frozenset(maxsize=128):
    return functools.lru_cache(maxsize=maxsize)


current_platform = _ctx.platform

__getattr__ = fallback_getattr(__name__, globals())
