#!/usr/bin/env python3
"""Records what CUDA-backed torch does on a table of small cases, as JSON: the truth that
kvsim's fake CUDA device (python/kvsim/fakecuda) is held to by
python/tests_target/test_fakecuda_fidelity.py.

  --mode real   torch as installed, on a real CUDA device (needs only torch)
  --mode fake   torch patched by kvsim.fakecuda (imports python/kvsim/fakecuda from this checkout)

Each record: case id, torch version, device name, and the outcome: {"ok": summary} or
{"raises": exception type, "mro": its bases up to Exception, "message": first line}.
A summary is plain JSON: tensors as dtype/device/shape/is_pinned (+ values when tiny).

Cases are deterministic (no timing) and keep to the torch 1.13 API. None of them may leave the
CUDA context broken (no out-of-bounds device indexing); in real mode each case is followed by a
synchronize, and should one fail anyway the remaining cases run in a fresh process.
"""

import argparse
import json
import os
import subprocess
import sys
import warnings

import torch

CASES = []  # (case id, function): in table order


def case(case_id):
    def register(fn):
        if any(c[0] == case_id for c in CASES):
            raise ValueError(f"duplicate case id {case_id}")
        CASES.append((case_id, fn))
        return fn
    return register


# ---- helpers (looked up at call time, so the fake's patched torch is what they use) -------------

def cu(data, dtype=None):
    return torch.tensor(data, dtype=dtype, device="cuda")


def ho(data, dtype=None):
    return torch.tensor(data, dtype=dtype)


def meta(t):
    """A tensor's description without values (for uninitialised memory)."""
    return {"meta": {"dtype": str(t.dtype), "device": t.device.type, "shape": list(t.shape),
                     "is_pinned": bool(t.is_pinned())}}


def summarize(x):
    if isinstance(x, torch.Tensor):
        out = meta(x)["meta"]
        if x.numel() <= 16:
            out["values"] = x.detach().cpu().tolist()
        return {"tensor": out}
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return {"int": x}
    if isinstance(x, float):
        return {"float": x}
    if isinstance(x, torch.device):
        return {"device": str(x)}
    if isinstance(x, torch.dtype):
        return {"dtype": str(x)}
    if isinstance(x, (list, tuple)):
        return [summarize(y) for y in x]
    if isinstance(x, dict):
        return {str(k): summarize(v) for k, v in x.items()}
    return {"object": type(x).__name__}


def sync():
    torch.cuda.synchronize()


# ---- 1. the device module -------------------------------------------------------------------

@case("cuda.is_available")
def _():
    return torch.cuda.is_available()


@case("cuda.device_count")
def _():
    return torch.cuda.device_count()


@case("cuda.current_device")
def _():
    return torch.cuda.current_device()


@case("cuda.set_device_0")
def _():
    return torch.cuda.set_device(0)


@case("cuda.set_device_cuda0_str")
def _():
    return torch.cuda.set_device("cuda:0")


@case("cuda.get_device_name_is_str")
def _():
    return [isinstance(torch.cuda.get_device_name(), str), isinstance(torch.cuda.get_device_name(0), str)]


@case("cuda.get_device_capability")
def _():
    cap = torch.cuda.get_device_capability()
    return [len(cap), [type(c).__name__ for c in cap]]


@case("cuda.get_device_properties_fields")
def _():
    p = torch.cuda.get_device_properties(0)
    return [isinstance(p.name, str), isinstance(p.total_memory, int), p.total_memory > 0,
            isinstance(p.major, int), isinstance(p.multi_processor_count, int)]


@case("cuda.mem_get_info_shape")
def _():
    info = torch.cuda.mem_get_info()
    return [type(info).__name__, len(info), [type(v).__name__ for v in info], 0 < info[0] <= info[1]]


@case("cuda.mem_get_info_device_arg")
def _():
    return len(torch.cuda.mem_get_info(0))


@case("cuda.memory_allocated_delta_of_1MiB_and_free")
def _():
    before = torch.cuda.memory_allocated()
    t = torch.empty(2**18, dtype=torch.float32, device="cuda")
    during = torch.cuda.memory_allocated()
    del t
    after = torch.cuda.memory_allocated()
    return [type(before).__name__, during - before, after - before]


@case("cuda.memory_reserved_ge_allocated")
def _():
    t = torch.empty(1024, device="cuda")  # noqa: F841 (held so that something is allocated)
    return [torch.cuda.memory_reserved() >= torch.cuda.memory_allocated(),
            torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()]


@case("cuda.empty_cache")
def _():
    return torch.cuda.empty_cache()


@case("cuda.is_initialized")
def _():
    torch.empty(1, device="cuda")
    return torch.cuda.is_initialized()


@case("cuda.synchronize")
def _():
    return torch.cuda.synchronize()


# ---- 2. factories and device attributes ------------------------------------------------------

@case("factory.empty_cuda")
def _():
    return meta(torch.empty(3, device="cuda"))


@case("factory.empty_cuda_int_device")
def _():
    return meta(torch.empty(2, 2, device=0))


@case("factory.zeros_cuda0")
def _():
    return torch.zeros(2, device="cuda:0")


@case("factory.ones_torch_device")
def _():
    return torch.ones(2, dtype=torch.int32, device=torch.device("cuda"))


@case("factory.full_cuda")
def _():
    return torch.full((2,), 7, device="cuda")


@case("factory.arange_cuda_int")
def _():
    return torch.arange(4, device="cuda")


@case("factory.arange_cuda_float")
def _():
    return torch.arange(3.0, device="cuda")


@case("factory.tensor_cuda")
def _():
    return torch.tensor([1, 2], device="cuda")


@case("factory.empty_zero_len_cuda")
def _():
    return torch.empty((0,), dtype=torch.int64, device="cuda")


@case("factory.empty_cuda_pin_memory")
def _():
    return meta(torch.empty(2, device="cuda", pin_memory=True))


@case("factory.zeros_pin_memory")
def _():
    return torch.zeros(2, pin_memory=True)


@case("factory.as_tensor_list_cuda")
def _():
    return torch.as_tensor([1, 2], device="cuda")


@case("factory.as_tensor_cpu_to_cuda")
def _():
    return torch.as_tensor(ho([1.0, 2.0]), device="cuda")


@case("factory.as_tensor_cuda_keeps_device")
def _():
    t = cu([1, 2])
    return torch.as_tensor(t).device.type


@case("factory.zeros_like_cuda")
def _():
    return torch.zeros_like(cu([1, 2]))


@case("factory.zeros_like_cuda_to_cpu")
def _():
    return torch.zeros_like(cu([1, 2]), device="cpu")


@case("factory.empty_like_cpu_to_cuda")
def _():
    return meta(torch.empty_like(ho([1, 2]), device="cuda"))


@case("factory.new_zeros_of_cuda")
def _():
    return cu([1, 2]).new_zeros(3)


@case("factory.new_tensor_of_cuda")
def _():
    return cu([1, 2]).new_tensor([5, 6])


@case("factory.new_empty_of_cpu_on_cuda")
def _():
    return meta(ho([1, 2]).new_empty(2, device="cuda"))


@case("attr.device_of_cuda")
def _():
    t = cu([1])
    return [str(t.device), t.device.type, t.device.index, t.device == torch.device("cuda", 0),
            t.device == torch.device("cuda")]


@case("attr.is_cuda_get_device")
def _():
    d, h = cu([1]), ho([1])
    return [d.is_cuda, h.is_cuda, d.get_device(), h.get_device()]


@case("attr.dtype_itemsize_uint64")
def _():
    return [torch.float32.itemsize, torch.int64.itemsize, hasattr(torch, "uint64")]


@case("attr.data_ptr_nonzero")
def _():
    return cu([1, 2]).data_ptr() != 0


@case("attr.untyped_storage_nbytes")
def _():
    return cu([1, 2, 3], torch.int32).untyped_storage().nbytes()


# ---- 3. pinned memory -----------------------------------------------------------------------

@case("pin.pin_memory_copy")
def _():
    h = ho([1, 2])
    p = h.pin_memory()
    return [h.is_pinned(), p.is_pinned(), p.data_ptr() == h.data_ptr()]


@case("pin.pin_memory_of_pinned_is_same_memory")
def _():
    p = torch.zeros(2, pin_memory=True)
    return p.pin_memory().data_ptr() == p.data_ptr()


@case("pin.view_of_pinned_is_pinned")
def _():
    p = torch.zeros(8, pin_memory=True)
    return [p[2:5].is_pinned(), p.view(2, 4)[1].is_pinned()]


@case("pin.clone_and_empty_like_of_pinned_not_pinned")
def _():
    p = torch.zeros(4, pin_memory=True)
    return [p.clone().is_pinned(), torch.empty_like(p).is_pinned()]


@case("pin.cuda_tensor_is_pinned")
def _():
    return cu([1]).is_pinned()


@case("pin.cuda_tensor_pin_memory")
def _():
    return cu([1]).pin_memory()


# ---- 4. .to / .cuda / .cpu -------------------------------------------------------------------

@case("to.cpu_to_cuda_str")
def _():
    return ho([1, 2]).to("cuda")


@case("to.cpu_to_cuda_device_obj")
def _():
    return ho([1, 2]).to(torch.device("cuda", 0))


@case("to.cpu_to_int_device")
def _():
    return ho([1, 2]).to(0)


@case("to.cpu_to_cuda_with_dtype")
def _():
    return ho([1, 2]).to("cuda", torch.float16)


@case("to.cpu_to_kw_device_dtype")
def _():
    return ho([1, 2]).to(device="cuda", dtype=torch.int32)


@case("to.cpu_to_other_tensor")
def _():
    return ho([1, 2]).to(cu([0.5]))


@case("to.cuda_to_cuda_is_self")
def _():
    t = cu([1])
    return [t.to("cuda") is t, t.to("cuda:0") is t, t.cuda() is t, t.to(torch.int64) is t]


@case("to.cpu_to_cpu_is_self")
def _():
    t = ho([1])
    return [t.to("cpu") is t, t.cpu() is t]


@case("to.cuda_to_dtype")
def _():
    return cu([1, 2]).to(torch.float64)


@case("to.cuda_to_cpu")
def _():
    t = cu([1, 2])
    out = t.to("cpu")
    return [out, out is t]


@case("to.cuda_cpu_method")
def _():
    return cu([3, 4]).cpu()


@case("to.cuda_to_cpu_non_blocking")
def _():
    out = cu([1, 2]).to("cpu", non_blocking=True)
    sync()
    return out


@case("to.cuda_to_cpu_non_blocking_on_side_stream")
def _():
    s = torch.cuda.Stream()
    d = cu([1, 2])
    with torch.cuda.stream(s):
        out = d.to("cpu", non_blocking=True)
    s.synchronize()
    return out


@case("index_select.cuda_cpu_0dim_idx")
def _():
    return cu([10, 11, 12]).index_select(0, ho(1))


@case("to.cpu_cuda_method")
def _():
    return [ho([1, 2]).cuda(), ho([1]).cuda(0).device.type]


@case("to.pinned_to_cuda_non_blocking")
def _():
    p = torch.zeros(2, pin_memory=True).add_(4)
    out = p.to("cuda", non_blocking=True)
    sync()
    return out


@case("to.cpu_to_cuda_copy_true")
def _():
    t = cu([1])
    out = t.to("cuda", copy=True)
    return [out is t, out.data_ptr() == t.data_ptr(), out]


# ---- 5. copy_ -----------------------------------------------------------------------------------

@case("copy.host_to_device")
def _():
    d = torch.zeros(3, device="cuda")
    d.copy_(ho([1.0, 2.0, 3.0]))
    return d


@case("copy.device_to_host")
def _():
    h = torch.zeros(3)
    h.copy_(cu([1.0, 2.0, 3.0]))
    return h


@case("copy.pinned_to_device_non_blocking")
def _():
    p = torch.zeros(3, pin_memory=True).add_(2)
    d = torch.zeros(3, device="cuda")
    d.copy_(p, non_blocking=True)
    sync()
    return d


@case("copy.device_to_pinned_non_blocking")
def _():
    p = torch.zeros(3, pin_memory=True)
    p.copy_(cu([7.0, 8.0, 9.0]), non_blocking=True)
    sync()
    return p


@case("copy.host_to_device_converts_dtype")
def _():
    d = torch.zeros(2, dtype=torch.float16, device="cuda")
    d.copy_(ho([1, 2], torch.int64))
    return d


@case("copy.host_to_device_broadcast")
def _():
    d = torch.zeros(3, device="cuda")
    d.copy_(ho([5.0]))
    return d


@case("copy.host_to_device_shape_mismatch")
def _():
    d = torch.zeros(3, device="cuda")
    return d.copy_(ho([1.0, 2.0]))


@case("copy.python_scalar_source")
def _():
    d = torch.zeros(2, device="cuda")
    return d.copy_(3)


@case("copy.side_stream_non_blocking_then_sync")
def _():
    s = torch.cuda.Stream()
    p = torch.zeros(4, pin_memory=True).add_(3)
    d = torch.zeros(4, device="cuda")
    with torch.cuda.stream(s):
        d.copy_(p, non_blocking=True)
        back = torch.zeros(4, pin_memory=True)
        back.copy_(d, non_blocking=True)
    s.synchronize()
    return [d, back]


@case("copy.to_non_blocking_on_side_stream_then_sync")
def _():
    s = torch.cuda.Stream()
    h = ho([1, 2, 3])
    with torch.cuda.stream(s):
        out = h.to("cuda", non_blocking=True)
    s.synchronize()
    return out


# ---- 6. binary / comparison ops mixing devices -----------------------------------------------

@case("mix.add_cuda_cpu")
def _():
    return cu([1, 2]) + ho([1, 2])


@case("mix.add_cpu_cuda")
def _():
    return ho([1, 2]) + cu([1, 2])


@case("mix.add_cuda_cpu_0dim")
def _():
    return cu([1, 2]) + ho(3)


@case("mix.add_cpu_0dim_cuda")
def _():
    return ho(3) + cu([1, 2])


@case("mix.add_cuda_0dim_cpu")
def _():
    return cu(3) + ho([1, 2])


@case("mix.add_cuda_cpu_len1")
def _():
    return cu([1, 2]) + ho([3])


@case("mix.add_cuda_python_scalar")
def _():
    return cu([1, 2]) + 3


@case("mix.add_inplace_cuda_cpu")
def _():
    return cu([1, 2]).add_(ho([1, 2]))


@case("mix.add_inplace_cpu_cuda")
def _():
    return ho([1, 2]).add_(cu([1, 2]))


@case("mix.add_inplace_cpu_cuda_0dim")
def _():
    return ho([1, 2]).add_(cu(1))


@case("mix.eq_cuda_cpu")
def _():
    return cu([1, 2]) == ho([1, 2])


@case("mix.eq_cuda_cpu_0dim")
def _():
    return cu([1, 2]) == ho(2)


@case("mix.lt_cuda_python_scalar")
def _():
    return cu([1, 2]) < 2


@case("mix.maximum_cuda_cpu")
def _():
    return torch.maximum(cu([1, 5]), ho([3, 3]))


@case("mix.torch_equal_cuda_cpu")
def _():
    return torch.equal(cu([1, 2]), ho([1, 2]))


@case("mix.and_cuda_mask_cpu_mask")
def _():
    return cu([True, False]) & ho([True, True])


@case("mix.promote_cuda_int32_cpu_int64_0dim")
def _():
    return cu([1, 2], torch.int32) + ho(1, torch.int64)


@case("mix.promote_cuda_int_cpu_float_0dim")
def _():
    return cu([1, 2]) + ho(0.5)


@case("mix.promote_cuda_int32_int64")
def _():
    return cu([1, 2], torch.int32) + cu([1, 2], torch.int64)


@case("mix.where_cuda_cuda_cpu")
def _():
    return torch.where(cu([True, False]), cu([1, 2]), ho([3, 4]))


@case("mix.where_cuda_cuda_scalar")
def _():
    return torch.where(cu([True, False]), cu([1.0, 2.0]), 0.0)


@case("mix.where_cpu_mask_cuda_cuda")
def _():
    return torch.where(ho([True, False]), cu([1, 2]), cu([3, 4]))


@case("mix.where_cuda_cuda_cpu_0dim")
def _():
    return torch.where(cu([True, False]), cu([1, 2]), ho(9))


@case("mix.where_one_arg_cuda")
def _():
    return torch.where(cu([False, True, True]))


@case("mix.cat_cuda_cpu")
def _():
    return torch.cat([cu([1]), ho([2])])


@case("mix.cat_cpu_cuda")
def _():
    return torch.cat([ho([1]), cu([2])])


@case("mix.cat_cuda_cuda")
def _():
    return torch.cat([cu([1]), cu([2, 3])])


@case("mix.cat_empty_list")
def _():
    return torch.cat([])


@case("mix.stack_cuda_cpu")
def _():
    return torch.stack([cu([1]), ho([2])])


@case("mix.stack_cuda_0dim_cpu_0dim")
def _():
    return torch.stack([cu(1), ho(2)])


@case("mix.isin_cuda_cpu")
def _():
    return torch.isin(cu([1, 2, 3]), ho([2]))


# ---- 7. indexing, index_select, index_put, masks -------------------------------------------------

@case("index.cuda_by_cuda_int64")
def _():
    return cu([10, 11, 12, 13])[cu([3, 1])]


@case("index.cuda_by_cpu_int64")
def _():
    return cu([10, 11, 12, 13])[ho([3, 1])]


@case("index.cuda_by_cuda_int32")
def _():
    return cu([10, 11, 12, 13])[cu([3, 1], torch.int32)]


@case("index.cuda_by_cpu_int32")
def _():
    return cu([10, 11, 12, 13])[ho([3, 1], torch.int32)]


@case("index.cpu_by_cpu_int32")
def _():
    return ho([10, 11, 12, 13])[ho([3, 1], torch.int32)]


@case("index.cpu_by_cuda_int64")
def _():
    return ho([10, 11, 12, 13])[cu([3, 1])]


@case("index.cpu_by_cuda_0dim")
def _():
    return ho([10, 11, 12, 13])[cu(2)]


@case("index.cuda_by_cpu_0dim")
def _():
    return cu([10, 11, 12, 13])[ho(2)]


@case("index.cuda_by_python_list")
def _():
    return cu([10, 11, 12, 13])[[0, 2]]


@case("index.cuda_by_float_index")
def _():
    return cu([10, 11, 12, 13])[cu([1.0])]


@case("index.cuda_by_int16_index")
def _():
    return cu([10, 11, 12, 13])[cu([1], torch.int16)]


@case("index.cuda_2d_row_by_cpu_idx_tuple")
def _():
    t = torch.arange(6, device="cuda").view(3, 2)
    return t[ho([2, 0]), :]


@case("index.cuda_2d_col_by_cpu_idx")
def _():
    t = torch.arange(6, device="cuda").view(3, 2)
    return t[:, ho([1])]


@case("index.cuda_by_cpu_bool_mask")
def _():
    return cu([10, 11, 12])[ho([True, False, True])]


@case("index.cpu_by_cuda_bool_mask")
def _():
    return ho([10, 11, 12])[cu([True, False, True])]


@case("index.cuda_by_cuda_uint8_mask")
def _():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cu([10, 11, 12])[cu([1, 0, 1], torch.uint8)]


@case("index_select.cuda_cuda_idx")
def _():
    return cu([10, 11, 12]).index_select(0, cu([2, 0]))


@case("index_select.cuda_cuda_int32_idx")
def _():
    return cu([10, 11, 12]).index_select(0, cu([2, 0], torch.int32))


@case("index_select.cuda_cpu_idx")
def _():
    return cu([10, 11, 12]).index_select(0, ho([2, 0]))


@case("index_select.cpu_cuda_idx")
def _():
    return ho([10, 11, 12]).index_select(0, cu([2, 0]))


@case("index_select.cuda_float_idx")
def _():
    return cu([10, 11, 12]).index_select(0, cu([1.0]))


@case("gather.cuda_cpu_idx")
def _():
    return torch.gather(cu([10, 11, 12]), 0, ho([2, 0]))


@case("scatter.cuda_cpu_idx")
def _():
    return torch.zeros(3, device="cuda").scatter_(0, ho([2, 0]), cu([1.0, 2.0]))


@case("setitem.cuda_by_cuda_idx_cuda_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[cu([1, 3])] = cu([5, 6])
    return t


@case("setitem.cuda_by_cpu_idx_cuda_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[ho([1, 3])] = cu([5, 6])
    return t


@case("setitem.cuda_by_cuda_idx_cpu_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[cu([1, 3])] = ho([5, 6])
    return t


@case("setitem.cuda_by_cuda_int32_idx")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[cu([1, 3], torch.int32)] = cu([5, 6])
    return t


@case("setitem.cuda_by_cuda_idx_scalar")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[cu([0, 2])] = 9
    return t


@case("setitem.cuda_by_cuda_idx_cpu_0dim")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[cu([0, 2])] = ho(9)
    return t


@case("setitem.cpu_by_cuda_idx")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[cu([1, 3])] = ho([5, 6])
    return t


@case("setitem.cpu_by_cpu_idx_cuda_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[ho([1, 3])] = cu([5, 6])
    return t


@case("setitem.cpu_slice_cuda_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[1:3] = cu([5, 6])
    return t


@case("setitem.cuda_slice_cpu_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    t[1:3] = ho([5, 6])
    return t


@case("setitem.cpu_int_cuda_0dim")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[2] = cu(7)
    return t


@case("setitem.cuda_by_cpu_mask_scalar")
def _():
    t = torch.zeros(3, device="cuda")
    t[ho([True, False, True])] = 1.0
    return t


@case("setitem.cpu_by_cpu_int32_idx")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[ho([1, 3], torch.int32)] = ho([5, 6])
    return t


@case("setitem.cpu_by_cuda_idx_cuda_vals")
def _():
    t = torch.zeros(4, dtype=torch.int64)
    t[cu([1, 3])] = cu([5, 6])
    return t


@case("setitem.cuda_by_cpu_mask_cpu_vals")
def _():
    t = torch.zeros(3, dtype=torch.int64, device="cuda")
    t[ho([True, False, True])] = ho([5, 6])
    return t


@case("getitem.cpu_2d_by_cuda_0dim_and_int")
def _():
    return torch.arange(6).view(3, 2)[cu(2), 1]


@case("index_put.cpu_cuda_idx_cpu_vals")
def _():
    return torch.zeros(4, dtype=torch.int64).index_put_((cu([1, 3]),), ho([5, 6]))


@case("index_put.cuda_cpu_idx_cuda_vals")
def _():
    return torch.zeros(4, dtype=torch.int64, device="cuda").index_put_((ho([1, 3]),), cu([5, 6]))


@case("index_put.cuda_cuda_idx_cpu_vals")
def _():
    return torch.zeros(4, dtype=torch.int64, device="cuda").index_put_((cu([1, 3]),), ho([5, 6]))


@case("index_put.cuda_cuda_int32_idx_accumulate")
def _():
    return torch.zeros(4, dtype=torch.int64, device="cuda").index_put_(
        (cu([1, 1], torch.int32),), cu([5, 6]), accumulate=True)


@case("index_copy.cuda_cpu_idx")
def _():
    return torch.zeros(3, device="cuda").index_copy_(0, ho([2]), cu([1.0]))


@case("index_fill.cuda_cpu_idx")
def _():
    return torch.zeros(3, device="cuda").index_fill_(0, ho([2]), 1.0)


@case("masked_fill.cuda_cuda_mask")
def _():
    return cu([1.0, 2.0]).masked_fill(cu([True, False]), 0.0)


@case("masked_fill.cuda_cpu_mask")
def _():
    return cu([1.0, 2.0]).masked_fill(ho([True, False]), 0.0)


@case("masked_fill.cuda_value_cpu_0dim")
def _():
    return cu([1.0, 2.0]).masked_fill(cu([True, False]), ho(5.0))


@case("masked_fill.cpu_value_cuda_0dim")
def _():
    return ho([1.0, 2.0]).masked_fill(ho([True, False]), cu(5.0))


@case("masked_select.cuda_cpu_mask")
def _():
    return torch.masked_select(cu([1, 2, 3]), ho([True, False, True]))


@case("ops.nonzero_unique_cumsum_on_cuda")
def _():
    t = cu([0, 3, 3, 1])
    return [t.nonzero(), torch.unique(t), torch.cumsum(t, 0), t.sum(), ~cu([True, False])]


@case("ops.sort_cuda")
def _():
    values, indices = torch.sort(cu([3, 1, 2]))
    return [values, indices]


# ---- 8. host values from device tensors -------------------------------------------------------

@case("host.item_int_float")
def _():
    return [cu([7]).item(), cu(2.5).item(), cu(True).item()]


@case("host.item_of_two_elements")
def _():
    return cu([1, 2]).item()


@case("host.tolist")
def _():
    return [cu([1, 2]).tolist(), cu([[True], [False]]).tolist(), cu(3).tolist()]


@case("host.bool_int_float_len")
def _():
    return [bool(cu([1])), bool(cu(0)), int(cu(5)), float(cu(1.5)), len(cu([1, 2, 3]))]


@case("host.bool_of_two_elements")
def _():
    return bool(cu([1, 2]))


@case("host.bool_of_empty")
def _():
    return bool(torch.empty(0, device="cuda"))


@case("host.numpy_of_cuda")
def _():
    return cu([1]).numpy()


@case("host.any_all_on_cuda")
def _():
    t = cu([True, False])
    return [t.any(), t.all(), bool(t.any())]


@case("host.index_as_python_int")
def _():
    return list(range(cu(3)))


# ---- 9. streams and events -------------------------------------------------------------------

@case("stream.current_is_default")
def _():
    a, b = torch.cuda.current_stream(), torch.cuda.default_stream()
    return [a == b, isinstance(a, torch.cuda.Stream)]


@case("stream.current_stream_identity")
def _():
    a, b = torch.cuda.current_stream(), torch.cuda.current_stream()
    return [a == b, a is b]


@case("stream.default_cuda_stream_handle")
def _():
    return torch.cuda.default_stream().cuda_stream


@case("stream.side_stream_handle_and_device")
def _():
    s = torch.cuda.Stream()
    return [s.cuda_stream != 0, s.device.type, s == torch.cuda.current_stream(),
            s == torch.cuda.default_stream()]


@case("stream.current_stream_device_args")
def _():
    return [torch.cuda.current_stream(0) == torch.cuda.current_stream(),
            torch.cuda.current_stream(torch.device("cuda")) == torch.cuda.current_stream()]


@case("stream.context_manager_sets_current")
def _():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s) as entered:
        inside = torch.cuda.current_stream() == s
    return [inside, entered is None, entered is s,
            torch.cuda.current_stream() == torch.cuda.default_stream()]


@case("stream.with_stream_object")
def _():
    s = torch.cuda.Stream()
    with s as entered:
        inside = torch.cuda.current_stream() == s
    return [inside, entered is s, torch.cuda.current_stream() == torch.cuda.default_stream()]


@case("stream.context_none_no_change")
def _():
    with torch.cuda.stream(None):
        return torch.cuda.current_stream() == torch.cuda.default_stream()


@case("stream.nested_contexts_restore")
def _():
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s1):
        with torch.cuda.stream(s2):
            inner = torch.cuda.current_stream() == s2
        middle = torch.cuda.current_stream() == s1
    return [inner, middle, torch.cuda.current_stream() == torch.cuda.default_stream()]


@case("stream.set_stream")
def _():
    s = torch.cuda.Stream()
    torch.cuda.set_stream(s)
    inside = torch.cuda.current_stream() == s
    torch.cuda.set_stream(torch.cuda.default_stream())
    return [inside, torch.cuda.current_stream() == torch.cuda.default_stream()]


@case("stream.priority")
def _():
    return [torch.cuda.Stream().priority, torch.cuda.Stream(priority=-1).priority]


@case("stream.query_synchronize_fresh")
def _():
    s = torch.cuda.Stream()
    return [s.query(), s.synchronize(), s.query()]


@case("stream.wait_stream_both_ways")
def _():
    s = torch.cuda.Stream()
    return [s.wait_stream(torch.cuda.current_stream()), torch.cuda.current_stream().wait_stream(s)]


@case("stream.wait_event_unrecorded")
def _():
    return torch.cuda.Stream().wait_event(torch.cuda.Event())


@case("stream.record_event_returns_event")
def _():
    s = torch.cuda.Stream()
    e = s.record_event()
    s.synchronize()
    return [isinstance(e, torch.cuda.Event), e.query()]


@case("event.query_before_record")
def _():
    return torch.cuda.Event().query()


@case("event.synchronize_before_record")
def _():
    return torch.cuda.Event().synchronize()


@case("event.record_sync_query")
def _():
    e = torch.cuda.Event()
    e.record()
    e.synchronize()
    return e.query()


@case("event.record_on_side_stream_then_wait")
def _():
    s = torch.cuda.Stream()
    e = torch.cuda.Event()
    e.record(s)
    r = [e.wait(torch.cuda.current_stream()), torch.cuda.current_stream().wait_event(e)]
    e.synchronize()
    return r + [e.query()]


@case("event.work_then_event_orders_copy")
def _():
    s = torch.cuda.Stream()
    d = torch.zeros(3, device="cuda")
    with torch.cuda.stream(s):
        d.copy_(ho([1.0, 2.0, 3.0]))
        e = torch.cuda.Event()
        e.record()
    torch.cuda.current_stream().wait_event(e)
    return d.sum()


@case("event.elapsed_time_without_timing")
def _():
    a, b = torch.cuda.Event(), torch.cuda.Event()
    a.record()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


@case("event.elapsed_time_unrecorded")
def _():
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    return a.elapsed_time(b)


@case("event.elapsed_time_recorded_is_float")
def _():
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    ms = a.elapsed_time(b)
    return [isinstance(ms, float), ms >= 0]


@case("record_stream.cuda_tensor")
def _():
    s = torch.cuda.Stream()
    return cu([1]).record_stream(s)


@case("record_stream.cpu_tensor")
def _():
    return ho([1]).record_stream(torch.cuda.Stream())


@case("record_stream.pinned_tensor")
def _():
    return torch.zeros(2, pin_memory=True).record_stream(torch.cuda.Stream())


@case("record_stream.current_stream")
def _():
    return cu([1]).record_stream(torch.cuda.current_stream())


# ---- 10. device-ordinal errors (last: they touch a device that does not exist) ---------------

@case("ordinal.set_device_1")
def _():
    return torch.cuda.set_device(1)


@case("ordinal.empty_cuda1")
def _():
    return torch.empty(2, device="cuda:1")


@case("ordinal.to_cuda1")
def _():
    return ho([1]).to("cuda:1")


# ---- running the table --------------------------------------------------------------------------

def run_case(case_id, fn, after_each=None):
    rec = {"case": case_id}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn()
            sync()
            rec["ok"] = summarize(value)
    except Exception as exc:  # noqa: BLE001 - the exception is the result
        mro = []
        for k in type(exc).__mro__:
            if k is Exception:
                break
            mro.append(k.__name__)
        rec["raises"] = type(exc).__name__
        rec["mro"] = mro
        rec["message"] = (str(exc).strip().splitlines() or [""])[0][:300]
    if after_each is not None:
        after_each(rec)
    return rec


def run_table(start=0, after_each=None, stop_on_broken=False):
    """Runs CASES[start:]; returns (records, index of the first case not run or None)."""
    records = []
    for i in range(start, len(CASES)):
        case_id, fn = CASES[i]
        records.append(run_case(case_id, fn, after_each))
        if stop_on_broken and not _context_healthy():
            records[-1]["context_broken_after"] = True
            return records, i + 1
    return records, None


def _context_healthy():
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add(1).cpu().item() == 2.0
    except Exception:  # noqa: BLE001
        return False


def install_fake(seed=0):
    """Imports kvsim.fakecuda from this checkout (without kvsim's C++ module) and installs it."""
    import importlib
    import types
    python_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    python_dir = os.path.normpath(python_dir)
    if python_dir not in sys.path:
        sys.path.insert(0, python_dir)
    try:
        import kvsim  # noqa: F401
    except ImportError as exc:
        if "_core" not in str(exc):
            raise
        for name in [n for n in sys.modules if n == "kvsim" or n.startswith("kvsim.")]:
            del sys.modules[name]
        pkg = types.ModuleType("kvsim")
        pkg.__path__ = [os.path.join(python_dir, "kvsim")]
        sys.modules["kvsim"] = pkg
    fc = importlib.import_module("kvsim.fakecuda")
    dev = fc.FakeDevice(seed=seed)
    dev.install()
    return dev


def header(mode):
    return {"torch": torch.__version__, "mode": mode, "device": torch.cuda.get_device_name(0),
            "cuda": getattr(torch.version, "cuda", None), "python": sys.version.split()[0],
            "cases": len(CASES)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("real", "fake"), required=True)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--start", type=int, default=0, help="(internal) first case index to run")
    args = ap.parse_args(argv)
    dev = None
    if args.mode == "fake":
        dev = install_fake()
    elif not torch.cuda.is_available():
        print("record_cuda_truth: --mode real needs a CUDA device", file=sys.stderr)
        return 2
    after_each = None
    if dev is not None:
        seen = [0]

        def after_each(rec):  # the fake's reports during the case (informative, not compared)
            new = dev.violations[seen[0]:]
            seen[0] = len(dev.violations)
            if new:
                rec["fake_violations"] = [v.kind for v in new]
    records, resume = run_table(args.start, after_each, stop_on_broken=args.mode == "real")
    if resume is not None and resume < len(CASES):
        # The CUDA context broke: the remaining cases run in a fresh process.
        part = args.out + f".from{resume}"
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--mode", args.mode,
                              "--out", part, "--start", str(resume)])
        if rc == 0:
            with open(part) as f:
                records += json.load(f)["records"]
            os.remove(part)
    head = header(args.mode)
    doc = dict(head, records=[dict(r, torch=head["torch"], device=head["device"]) for r in records])
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    n_ok = sum("ok" in r for r in records)
    print(f"record_cuda_truth: {len(records)} cases ({n_ok} ok, {len(records) - n_ok} raise) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
