"""Device tensors: CPU memory that reports ``cuda:0`` and obeys CUDA's device-mixing rules.

``DeviceTensor`` is a ``torch.Tensor`` subclass. Its ``__torch_function__`` raises where CUDA would
raise synchronously (an op mixing a device tensor with a non-scalar host tensor; indexing a host
tensor with device indices; ``numpy()``), routes transfers and copies through the fake device (so
that copies on a side stream are queued), and makes every tensor result a device tensor.
"""

import torch

from . import _state
from .streams import CUDA0

_TB = torch._C._TensorBase
_DisableTF = torch._C.DisableTorchFunction
_make_subclass = torch.Tensor._make_subclass
_base_of = _TB._base.__get__
_PlainTensor = torch.Tensor


class DeviceTensor(torch.Tensor):
    """A tensor in the fake GPU's memory (CPU storage underneath)."""

    @property
    def device(self):
        return CUDA0

    @property
    def is_cuda(self):
        return True

    @property
    def is_cpu(self):
        return False

    def get_device(self):
        return 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        handler = _SPECIAL.get(func)
        if handler is not None:
            return handler(func, args, kwargs)
        _check_same_device(func, args, kwargs)
        with _DisableTF():
            ret = func(*args, **kwargs)
        return wrap_result(ret)


def is_device(t):
    return type(t) is DeviceTensor


def _describe(func):
    return getattr(func, "__name__", None) or str(func)


def _mix_error(first_is_device, func):
    a, b = ("cuda:0", "cpu") if first_is_device else ("cpu", "cuda:0")
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}! "
        f"(when checking argument in method {_describe(func)})"
    )


def _scan(x, seen, scalar_ok=True):
    """Records in ``seen`` the first device kind met: 1 device, 2 host (non-scalar)."""
    if isinstance(x, _PlainTensor):
        if type(x) is DeviceTensor:
            if not seen:
                seen.append(1)
            elif seen[0] == 2:
                seen.append(1)
        elif x.dim() != 0 or not scalar_ok:  # 0-dim CPU tensors pass as scalars in CUDA ops
            if not seen:
                seen.append(2)
            elif seen[0] == 1:
                seen.append(2)
    elif isinstance(x, (list, tuple)):
        # a tensor list (torch.cat / torch.stack): CUDA takes no CPU scalar there
        for y in x:
            _scan(y, seen, scalar_ok=False)


# Ops whose tensor arguments are not read through TensorIterator: CUDA checks every tensor's
# device there and lets no 0-dim CPU tensor pass as a scalar (recorded on an H200:
# ``cuda.index_select(0, cpu_0dim)`` raises).
# Only ops whose every tensor argument is an index or a source of the same rank are listed
# (index_fill_'s 0-dim value tensor, for one, is read as a number).
_NO_CPU_SCALARS = frozenset({
    "index_select", "gather", "take", "scatter_add", "scatter_add_", "index_add", "index_add_",
    "index_copy", "index_copy_", "embedding",
})


def _check_same_device(func, args, kwargs):
    seen = []
    scalar_ok = _describe(func) not in _NO_CPU_SCALARS
    for a in args:
        _scan(a, seen, scalar_ok)
    for a in kwargs.values():
        _scan(a, seen, scalar_ok)
    if len(seen) > 1:
        raise _mix_error(seen[0] == 1, func)


def wrap_result(ret):
    if isinstance(ret, _PlainTensor):
        if type(ret) is DeviceTensor:
            return ret
        if _base_of(ret) is not None:
            return ret.as_subclass(DeviceTensor)  # an alias of a view: keeps the same root
        out = _make_subclass(DeviceTensor, ret)
        dev = _state.ACTIVE[0]
        if dev is not None and dev.current_stream is not dev.default_stream:
            out._fc_stream = dev.current_stream
        return out
    if isinstance(ret, (tuple, list)):
        wrapped = [wrap_result(r) for r in ret]
        if hasattr(ret, "_fields"):  # a named tuple (torch.return_types)
            return type(ret)(wrapped)
        return type(ret)(wrapped)
    return ret


def to_device_tensor(plain, stream=None):
    """Wraps a fresh plain tensor as a device tensor allocated on ``stream`` (default: current)."""
    out = _make_subclass(DeviceTensor, plain)
    dev = _state.active_device()
    stream = stream or dev.current_stream
    if stream is not dev.default_stream:
        out._fc_stream = stream
    return out


def plain(t):
    """The host view of a device tensor's memory, sharing it (for the device's own code)."""
    with _DisableTF():
        return t.as_subclass(_PlainTensor) if type(t) is DeviceTensor else t


# ---- device arguments -------------------------------------------------------------------------

def parse_device(d):
    """'cuda' / 'cuda:0' / torch.device / int -> 'cuda'; 'cpu' -> 'cpu'; None -> None."""
    if d is None:
        return None
    if isinstance(d, int) and not isinstance(d, bool):
        if d != 0:
            raise RuntimeError(f"CUDA error: invalid device ordinal (fake device has 1 GPU, got {d})")
        return "cuda"
    if isinstance(d, str):
        d = torch.device(d)
    if isinstance(d, torch.device):
        if d.type == "cuda":
            if d.index not in (None, 0):
                raise RuntimeError(f"CUDA error: invalid device ordinal (fake device has 1 GPU, got {d})")
            return "cuda"
        if d.type == "cpu":
            return "cpu"
        raise RuntimeError(f"kvsim.fakecuda: unsupported device {d}")
    raise TypeError(f"not a device: {d!r}")


def parse_to_args(self, args, kwargs):
    """Tensor.to's overloads -> (device kind or None, dtype or None, non_blocking, copy)."""
    device = kwargs.get("device")
    dtype = kwargs.get("dtype")
    non_blocking = kwargs.get("non_blocking", False)
    copy = kwargs.get("copy", False)
    bools = []
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, _PlainTensor):
            device = "cuda" if type(a) is DeviceTensor else "cpu"
            dtype = a.dtype
        elif isinstance(a, bool):
            bools.append(a)
        elif isinstance(a, (str, torch.device, int)):
            device = a
        elif a is None:
            pass
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
    if bools:
        non_blocking = bools[0]
        if len(bools) > 1:
            copy = bools[1]
    kind = parse_device(device) if not isinstance(device, str) or device not in ("cuda", "cpu") else device
    return kind, dtype, bool(non_blocking), bool(copy)


# ---- special handlers (func -> handler(func, args, kwargs)) ------------------------------------

def _h_to(func, args, kwargs):
    self = args[0]
    kind, dtype, non_blocking, copy = parse_to_args(self, args[1:], kwargs)
    dev = _state.active_device()
    if kind == "cpu":
        return dev.copy_to_host(self, dtype=dtype, non_blocking=non_blocking)
    if dtype is None or dtype == self.dtype:
        if copy:
            return dev.copy_to_device(self, dtype=dtype, non_blocking=non_blocking)
        return self
    with _DisableTF():
        ret = _TB.to(self, dtype)
    return wrap_result(ret)


def _h_cuda(func, args, kwargs):
    device = kwargs.get("device", args[1] if len(args) > 1 else None)
    parse_device(device if device is not None else "cuda")
    return args[0]


def _h_cpu(func, args, kwargs):
    return _state.active_device().copy_to_host(args[0])


def _h_copy(func, args, kwargs):
    dst, src = args[0], args[1]
    non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    return _state.active_device().copy_(dst, src, non_blocking=bool(non_blocking))


def _has_device_tensor(x):
    if type(x) is DeviceTensor:
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_device_tensor(y) for y in x)
    return False


def _indices_error():
    return RuntimeError("indices should be either on cpu or on the same device as the indexed tensor (cpu)")


def _widen_indices(index):
    """int32 index tensors as int64: torch >= 2 indexes with int32 tensors (SGLang's req_to_token
    rows are int32 and index its pools directly); Debian's torch 1.13 refuses them. The same
    positions either way; bool and uint8 masks and int64 indices pass unchanged."""
    if isinstance(index, _PlainTensor):
        if index.dtype == torch.int32:
            with _DisableTF():
                return _TB.to(index, torch.int64)
        return index
    if isinstance(index, tuple):
        return tuple(_widen_indices(i) for i in index)
    if isinstance(index, list) and any(isinstance(i, _PlainTensor) for i in index):
        return [_widen_indices(i) for i in index]
    return index


def _is_advanced(index):
    """Whether ``t[index]`` is advanced indexing (index_put_ / index), not a view plus copy_."""
    if isinstance(index, (_PlainTensor, list)):
        return True
    if isinstance(index, tuple):
        return any(isinstance(i, (_PlainTensor, list)) for i in index)
    return False


def _device_scalars_to_ints(index):
    """0-dim integer device tensors in a host tensor's index read as Python ints (a sync), as
    torch does: ``host[device_scalar]`` selects; other device indices stay as they are."""
    def one(i):
        if type(i) is DeviceTensor and i.dim() == 0 and i.dtype not in (torch.bool, torch.uint8) \
                and not i.dtype.is_floating_point and not i.dtype.is_complex:
            with _DisableTF():
                return int(_TB.item(i))
        return i
    if isinstance(index, tuple):
        return tuple(one(i) for i in index)
    return one(index)


def _indices_to_host(index):
    dev = _state.active_device()
    if type(index) is DeviceTensor:
        return dev.copy_to_host(index)
    if isinstance(index, (tuple, list)):
        return type(index)(_indices_to_host(i) for i in index)
    return index


def _has_int32_index(index):
    if isinstance(index, _PlainTensor):
        return index.dtype == torch.int32
    if isinstance(index, (tuple, list)):
        return any(isinstance(i, _PlainTensor) and i.dtype == torch.int32 for i in index)
    return False


def host_getitem(self, index):
    """torch.Tensor.__getitem__ under install: int32 index tensors into host tensors as torch 2.x
    takes them (see _widen_indices); device tensors go on to __torch_function__."""
    if type(self) is not DeviceTensor and _has_int32_index(index):
        index = _widen_indices(index)
    return _TB.__getitem__(self, index)


def host_setitem(self, index, value):
    if type(self) is not DeviceTensor and _has_int32_index(index):
        index = _widen_indices(index)
    return _TB.__setitem__(self, index, value)


def _h_getitem(func, args, kwargs):
    self, index = args[0], args[1]
    if type(self) is not DeviceTensor:
        index = _device_scalars_to_ints(index)
        if _has_device_tensor(index):
            raise _indices_error()
    args = (self, _widen_indices(index)) + tuple(args[2:])
    with _DisableTF():
        ret = func(*args, **kwargs)
    return wrap_result(ret) if type(self) is DeviceTensor else ret


def _h_setitem(func, args, kwargs):
    """``self[index] = value``, recorded from torch 2.11 on a GPU (tools/cuda_truth): advanced
    indexing (index_put_) takes indices on either device but only a 0-dim value from the other
    device; basic indexing copies the value across (copy_)."""
    self, index = args[0], args[1]
    value = args[2] if len(args) > 2 else kwargs.get("value")
    if type(self) is not DeviceTensor:
        index = _device_scalars_to_ints(index)
        advanced = _is_advanced(index)
        if advanced and _has_device_tensor(index):
            index = _indices_to_host(index)  # index_put_ on a host tensor moves device indices
        if type(value) is DeviceTensor:
            if advanced and value.dim() != 0:
                raise _mix_error(False, func)
            value = _state.active_device().copy_to_host(value)
    elif isinstance(value, _PlainTensor) and type(value) is not DeviceTensor and value.dim() != 0 \
            and _is_advanced(index):
        raise _mix_error(True, func)
    args = (self, _widen_indices(index), value)
    with _DisableTF():
        return func(*args)


def _h_index_put(func, args, kwargs):
    self, indices = args[0], args[1]
    values = args[2] if len(args) > 2 else kwargs.get("values")
    if type(self) is not DeviceTensor:
        if type(values) is DeviceTensor:
            raise _mix_error(False, func)
        if _has_device_tensor(indices):
            # what host[dev_idx] = values does on a GPU (recorded): index_put_ moves the indices
            indices = _indices_to_host(indices)
    elif isinstance(values, _PlainTensor) and type(values) is not DeviceTensor and values.dim() != 0:
        raise _mix_error(True, func)
    args = (self, _widen_indices(indices)) + tuple(args[2:])
    with _DisableTF():
        ret = func(*args, **kwargs)
    return wrap_result(ret) if type(self) is DeviceTensor else ret


def _h_numpy(func, args, kwargs):
    raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                    "tensor to host memory first.")


def _h_item(func, args, kwargs):
    self = args[0]
    if self.numel() != 1:  # torch 2.x's error (torch 1.13 raised ValueError)
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
    with _DisableTF():
        return func(*args, **kwargs)


def _h_record_stream(func, args, kwargs):
    stream = args[1] if len(args) > 1 else kwargs.get("stream")
    _state.active_device().record_stream(args[0], stream)


def _h_is_pinned(func, args, kwargs):
    return False


def _h_pin_memory(func, args, kwargs):
    raise RuntimeError("cannot pin 'torch.cuda.Tensor' only dense CPU tensors can be pinned")


def _h_data_ptr(func, args, kwargs):
    dev = _state.active_device()
    dev.register_memory(args[0])
    return _TB.data_ptr(args[0])


def _likes(func, args, kwargs):
    """*_like / new_* factories: the result is on ``device=`` if given, else on the input's device."""
    kwargs = dict(kwargs)
    kind = parse_device(kwargs.pop("device", None))
    pin = kwargs.pop("pin_memory", False)
    src = args[0]
    host_args = (plain(src),) + tuple(args[1:])
    with _DisableTF():
        ret = func(*host_args, **kwargs)
    dev = _state.active_device()
    if kind == "cuda" or (kind is None and type(src) is DeviceTensor):
        return dev.adopt_new(ret)
    if pin:
        dev.adopt_pinned(ret)
    return ret


def _h_new_tensor(func, args, kwargs):
    kwargs = dict(kwargs)
    kind = parse_device(kwargs.pop("device", None))
    src, data = args[0], args[1] if len(args) > 1 else kwargs.pop("data")
    if type(data) is DeviceTensor:
        data = plain(data)
    with _DisableTF():
        ret = _TB.new_tensor(plain(src), data, *args[2:], **kwargs)
    if kind == "cuda" or (kind is None and type(src) is DeviceTensor):
        return _state.active_device().adopt_new(ret)
    return ret


_SPECIAL = {
    _TB.to: _h_to,
    torch.Tensor.to: _h_to,
    _TB.cuda: _h_cuda,
    torch.Tensor.cuda: _h_cuda,
    _TB.cpu: _h_cpu,
    torch.Tensor.cpu: _h_cpu,
    _TB.copy_: _h_copy,
    torch.Tensor.copy_: _h_copy,
    _TB.__getitem__: _h_getitem,
    torch.Tensor.__getitem__: _h_getitem,
    host_getitem: _h_getitem,  # what __torch_function__ receives while install has set them
    _TB.__setitem__: _h_setitem,
    torch.Tensor.__setitem__: _h_setitem,
    host_setitem: _h_setitem,
    _TB.index_put_: _h_index_put,
    _TB.index_put: _h_index_put,
    torch.index_put: _h_index_put,
    torch.index_put_: _h_index_put,
    _TB.numpy: _h_numpy,
    torch.Tensor.numpy: _h_numpy,
    torch.Tensor.__array__: _h_numpy,
    _TB.item: _h_item,
    torch.Tensor.item: _h_item,
    _TB.record_stream: _h_record_stream,
    torch.Tensor.record_stream: _h_record_stream,
    _TB.is_pinned: _h_is_pinned,
    torch.Tensor.is_pinned: _h_is_pinned,
    _TB.pin_memory: _h_pin_memory,
    torch.Tensor.pin_memory: _h_pin_memory,
    _TB.data_ptr: _h_data_ptr,
    torch.Tensor.data_ptr: _h_data_ptr,
    _TB.new_tensor: _h_new_tensor,
    torch.Tensor.new_tensor: _h_new_tensor,
}
for _name in ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
              "randint_like"):
    _SPECIAL[getattr(torch, _name)] = _likes
for _name in ("new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"):
    _SPECIAL[getattr(_TB, _name)] = _likes
    _SPECIAL[getattr(torch.Tensor, _name)] = _likes
