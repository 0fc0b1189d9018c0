"""Stand-in for SGLang's transfer-kernel modules (sgl_kernel.kvcacheio, sglang.jit_kernel.*,
sglang.kernels.ops.kvcache.*): names the fake device's kernel module defines
(kvsim.fakecuda.kernels.module_for(device)) are served from it; `can_use_*` probes it does not
answer report False, so SGLang takes its non-JIT path; any other kernel raises when called."""

from kvsim.sglang_target.dummy import make_dummy

_ctx = _kvsim_load  # noqa: F821 - injected by the loader
__path__ = []


def _unavailable(*_args, **_kwargs):
    return False


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    kernels = _ctx.kernels
    if kernels is not None and hasattr(kernels, name):
        value = getattr(kernels, name)
    elif name.startswith("can_use_") or name.startswith("is_available"):
        value = _unavailable
    else:
        value = make_dummy(f"{__name__}.{name}")
    globals()[name] = value
    return value
