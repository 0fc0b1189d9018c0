"""Patches torch so that code written for CUDA runs on the fake device, reversibly.

Everything set is recorded with what was there before (or its absence) and put back by restore().
"""

import contextlib
import ctypes
import gc
import types

import torch

from .tensor import (DeviceTensor, _h_new_tensor, _h_to, _likes, host_getitem, host_setitem, parse_device,
                     parse_to_args, plain)

_TB = torch._C._TensorBase
_DisableTF = torch._C.DisableTorchFunction
_ABSENT = object()

_FACTORIES = ("empty", "zeros", "ones", "full", "arange", "tensor", "randn", "rand", "randint",
              "randperm", "empty_strided", "linspace", "eye")
_RANDOM = ("randn", "rand", "randint", "randperm")
_LIKES = ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like")


class Installer:
    def __init__(self, dev):
        self.dev = dev
        self._saved = []  # (owner, name, previous value or _ABSENT)
        self._dtype_dict_added = False

    def __enter__(self):
        return self.dev

    def __exit__(self, *exc):
        self.dev.uninstall()
        return False

    def _set(self, owner, name, value):
        previous = owner.__dict__.get(name, _ABSENT) if isinstance(owner, type) else \
            getattr(owner, name, _ABSENT)
        self._saved.append((owner, name, previous))
        setattr(owner, name, value)

    def apply(self):
        dev = self.dev
        for name, value in vars(dev.module).items():
            if not name.startswith("__"):
                self._set(torch.cuda, name, value)
        for name in _FACTORIES:
            self._set(torch, name, _factory(dev, getattr(torch, name), name in _RANDOM))
        for name in _LIKES:
            self._set(torch, name, _like_factory(getattr(torch, name)))
        self._set(torch, "as_tensor", _as_tensor(dev, torch.as_tensor))
        self._patch_tensor_methods()
        self._add_torch2_gaps()

    def _patch_tensor_methods(self):
        dev = self.dev
        orig_to = _TB.to
        orig_data_ptr = _TB.data_ptr

        def to(self, *args, **kwargs):
            if type(self) is DeviceTensor:
                return _h_to(None, (self,) + args, kwargs)
            kind, dtype, non_blocking, _copy = parse_to_args(self, args, kwargs)
            if kind == "cuda":
                return dev.copy_to_device(self, dtype=dtype, non_blocking=non_blocking)
            return orig_to(self, *args, **kwargs)

        def cuda(self, device=None, non_blocking=False, memory_format=None):
            parse_device(device if device is not None else "cuda")
            if type(self) is DeviceTensor:
                return self
            return dev.copy_to_device(self, non_blocking=non_blocking)

        def is_pinned(self, device=None):
            if type(self) is DeviceTensor:
                return False
            base = _TB._base.__get__(self)
            root = self if base is None else base
            return bool(root.__dict__.get("_fc_pinned", False))

        def pin_memory(self, device=None):
            if type(self) is DeviceTensor:
                raise RuntimeError("cannot pin 'torch.cuda.Tensor' only dense CPU tensors can be pinned")
            if is_pinned(self):
                return self  # torch returns a pinned tensor itself (same memory)
            with _DisableTF():
                out = _TB.clone(self)
            return dev.adopt_pinned(out)

        def record_stream(self, stream):
            if type(self) is not DeviceTensor:
                raise RuntimeError("record_stream: expected a CUDA tensor, got a host (cpu) tensor")
            dev.record_stream(self, stream)

        def data_ptr(self):
            dev.register_memory(self)
            return orig_data_ptr(self)

        for name, fn in (("to", to), ("cuda", cuda), ("pin_memory", pin_memory),
                         ("is_pinned", is_pinned), ("data_ptr", data_ptr),
                         ("record_stream", record_stream), ("__getitem__", host_getitem),
                         ("__setitem__", host_setitem)):
            self._set(torch.Tensor, name, fn)
        for name in ("new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"):
            self._set(torch.Tensor, name, _host_new(getattr(_TB, name), _likes))
        self._set(torch.Tensor, "new_tensor", _host_new(_TB.new_tensor, _h_new_tensor))

    def _add_torch2_gaps(self):
        dev = self.dev
        if not hasattr(torch, "uint64"):
            self._set(torch, "uint64", torch.int64)  # pointer tables: addresses fit in int64
        if not hasattr(torch.Tensor, "untyped_storage"):
            self._set(torch.Tensor, "untyped_storage", lambda self: self.storage().untyped())

        def get_device_module(device=None):
            kind = "cuda" if device is None else (device if isinstance(device, str) and ":" not in device
                                                  else torch.device(device).type)
            if kind == "cuda":
                return dev.module
            if kind == "cpu":
                return getattr(torch, "cpu", None)
            raise RuntimeError(f"kvsim.fakecuda: no device module for {device!r}")

        if not hasattr(torch, "get_device_module"):
            self._set(torch, "get_device_module", get_device_module)
        if not hasattr(torch, "compiler"):
            compiler = types.ModuleType("torch.compiler")
            compiler.disable = lambda fn=None, recursive=True, **kw: fn if fn is not None else (lambda f: f)
            compiler.is_compiling = lambda: False
            compiler.is_dynamo_compiling = lambda: False
            compiler.allow_in_graph = lambda fn: fn
            self._set(torch, "compiler", compiler)
        if not hasattr(torch, "accelerator"):
            acc = types.ModuleType("torch.accelerator")
            acc.is_available = lambda: True
            acc.current_accelerator = lambda *a, **k: torch.device("cuda")
            acc.device_count = lambda: 1
            acc.current_device_index = lambda: 0
            acc.current_stream = lambda device=None: dev.current_stream
            acc.synchronize = lambda device=None: dev.drain()
            self._set(torch, "accelerator", acc)
        if not hasattr(torch.float32, "itemsize"):
            d = gc.get_referents(torch.dtype.__dict__)[0]  # the type's real dict (immutable type)
            sizes = {}

            def itemsize(dtype):
                size = sizes.get(dtype)
                if size is None:
                    size = sizes[dtype] = torch.empty((), dtype=dtype).element_size()
                return size

            d["itemsize"] = property(itemsize)
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(torch.dtype))
            self._dtype_dict_added = True

    def restore(self):
        for owner, name, previous in reversed(self._saved):
            if previous is _ABSENT:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, previous)
        self._saved.clear()
        if self._dtype_dict_added:
            d = gc.get_referents(torch.dtype.__dict__)[0]
            d.pop("itemsize", None)
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(torch.dtype))
            self._dtype_dict_added = False


def _factory(dev, orig, is_random):
    def factory(*args, **kwargs):
        kind = parse_device(kwargs.pop("device", None))
        pin = kwargs.pop("pin_memory", False)
        if kind == "cuda":
            if pin:
                raise RuntimeError("Only dense CPU tensors can be pinned")
            if is_random and kwargs.get("generator") is None:
                kwargs["generator"] = dev.generator  # the device's RNG, apart from the host's
            args = tuple(plain(a) if type(a) is DeviceTensor else a for a in args)
            with _DisableTF():
                ret = orig(*args, **kwargs)
            return dev.adopt_new(ret)
        ret = orig(*args, **kwargs)
        if pin:
            dev.adopt_pinned(ret)
        return ret

    factory.__name__ = getattr(orig, "__name__", "factory")
    factory.__wrapped__ = orig
    return factory


def _host_new(orig, handler):
    """Tensor.new_*(..., device='cuda') on a host tensor: a host tensor's methods bypass the device
    tensor's __torch_function__, so without this the device= would reach torch's own (CPU-only)
    dispatch. Device tensors and other devices take the original method."""
    def new(self, *args, **kwargs):
        if type(self) is not DeviceTensor and parse_device(kwargs.get("device")) == "cuda":
            return handler(orig, (self,) + args, kwargs)
        return orig(self, *args, **kwargs)

    new.__name__ = orig.__name__
    return new


def _like_factory(orig):
    def like(*args, **kwargs):
        if args and type(args[0]) is DeviceTensor or parse_device(kwargs.get("device")) == "cuda" \
                or kwargs.get("pin_memory"):
            return _likes(orig, args, kwargs)
        return orig(*args, **kwargs)

    like.__name__ = getattr(orig, "__name__", "like")
    like.__wrapped__ = orig
    return like


def _as_tensor(dev, orig):
    def as_tensor(data, dtype=None, device=None):
        kind = parse_device(device)
        if isinstance(data, torch.Tensor):
            target = kind or ("cuda" if type(data) is DeviceTensor else "cpu")
            return data.to(device=target, dtype=dtype or data.dtype)
        if kind == "cuda":
            with _DisableTF():
                return dev.adopt_new(orig(data, dtype=dtype))
        return orig(data, dtype=dtype, device=device)

    as_tensor.__wrapped__ = orig
    return as_tensor
