"""Stand-in for SGLang's fp8_kernel module (sglang.srt.layers.quantization / sglang.kernels.ops
.quantization): not the ROCm fnuz variant; the fp8 dtype is torch's where this torch has one."""

import torch

from kvsim.sglang_target.dummy import fallback_getattr

__path__ = []
fp8_dtype = getattr(torch, "float8_e4m3fn", None)
fp8_max = 448.0
fp8_min = -448.0


def is_fp8_fnuz():
    return False


__getattr__ = fallback_getattr(__name__, globals())
