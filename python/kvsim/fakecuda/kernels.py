"""Fake HiCache transfer kernels: plain-torch byte copies with the input checks of SGLang's CUDA
kernels (sgl_kernel.kvcacheio, the JIT hicache kernels, the Mamba transfer kernels), queued on the
current fake stream.

Semantics follow the kernels' documented contract: ``item_size`` is bytes per token (per layer);
a "layer-first" (lf) address is ``base + index * item_size``; a "page-first" (pf) address is
``base + index * layout_dim + layer * item_size``; a pointer table (``*_layers`` / ``*_ptrs`` / ``k_ptr_*``)
holds one base address per layer (``data_ptr()`` values), read when the op runs; "page-head" (ph)
splits each token into ``head_num`` pieces laid out [page, head, token-in-page, layer, head_dim].
Indices are read when the op runs too, so indices freed and poisoned before then give an
``illegal_address`` violation and a CUDA-like error, as the real kernel would fault or copy garbage.

``module_for(dev)`` returns a namespace holding all of them under their SGLang names, to serve in
place of ``sgl_kernel.kvcacheio``, ``sglang.jit_kernel.hicache`` / ``sglang.kernels.ops.kvcache.hicache``
and ``sglang.kernels.ops.mamba.transfer_mamba``.
"""

import types

import torch

from .tensor import is_device

_DisableTF = torch._C.DisableTorchFunction


class FakeCudaError(RuntimeError):
    """What a queued op raises when it touches memory it must not (CUDA's illegal address)."""


# ---- checks --------------------------------------------------------------------------------------

def _fail(dev, kernel, message):
    dev._report("kernel_input", f"{kernel}: {message}")
    raise RuntimeError(message)


def _check_indices(dev, kernel, src_indices, dst_indices, need_cuda=True, dtypes=(torch.int64,)):
    if need_cuda:
        if not is_device(src_indices):
            _fail(dev, kernel, "Source indices must be a CUDA tensor")
        if not is_device(dst_indices):
            _fail(dev, kernel, "Destination indices must be a CUDA tensor")
    if src_indices.dtype not in dtypes:
        _fail(dev, kernel, "Source indices must be of type long")
    if dst_indices.dtype not in dtypes:
        _fail(dev, kernel, "Destination indices must be of type long")
    if src_indices.numel() != dst_indices.numel():
        _fail(dev, kernel, "Source and destination indices must have the same length")


def _check_item(dev, kernel, item_size):
    if item_size <= 0 or item_size % 8 != 0:
        _fail(dev, kernel, "Item byte size must be divisible by 8")


def _check_table(dev, kernel, table, num_layers, what="source"):
    if not is_device(table):
        _fail(dev, kernel, f"The {what} layer pointer table must be a CUDA tensor")
    if table.dim() != 1 or table.size(0) != num_layers:
        _fail(dev, kernel, f"Number of layers in {what} tensor does not match num_layers")


def _check_buffer(dev, kernel, t, what):
    if not isinstance(t, torch.Tensor):
        _fail(dev, kernel, f"{what} must be a tensor")
    if not (is_device(t) or t.is_pinned()):
        # A kernel can address device memory and pinned / registered host memory only.
        _fail(dev, kernel, f"{what} must be device memory or pinned host memory")


# ---- byte engine (runs inside queued ops, on plain tensors) --------------------------------------

def _bytes_of(t):
    """(flat uint8 view of t's whole storage, byte offset of t's first element)."""
    with _DisableTF():
        st = t.storage()
        flat = torch.empty(0, dtype=torch.uint8).set_(
            torch.storage.TypedStorage(wrap_storage=st._storage, dtype=torch.uint8))
        return flat, t.storage_offset() * t.element_size()


def _resolve_table(dev, kernel, table, num_layers):
    """Pointer table values -> [(flat, offset)] per layer; a bad address is an illegal access."""
    out = []
    for layer, address in enumerate(table.tolist()[:num_layers]):
        hit = dev.resolve(int(address))
        if hit is None:
            _illegal(dev, kernel, f"layer {layer} pointer {int(address):#x} is not a live allocation")
        out.append(hit)
    return out


def _illegal(dev, kernel, detail):
    dev._report("illegal_address", f"{kernel}: {detail}")
    raise FakeCudaError(f"CUDA error: an illegal memory access was encountered ({kernel}: {detail})")


def _copy_items(dev, kernel, src, src_offs, dst, dst_offs, nbytes):
    """For every i: dst bytes [dst_offs[i], +nbytes) = src bytes [src_offs[i], +nbytes)."""
    if src_offs.numel() == 0:
        return
    sflat, dflat = src[0], dst[0]
    s = src_offs + src[1]
    d = dst_offs + dst[1]
    for offs, flat, side in ((s, sflat, "source"), (d, dflat, "destination")):
        lo, hi = int(offs.min()), int(offs.max())
        if lo < 0 or hi + nbytes > flat.numel():
            _illegal(dev, kernel, f"{side} byte range [{lo}, {hi + nbytes}) outside its allocation "
                                  f"of {flat.numel()} bytes (indices garbage or out of range)")
    span = torch.arange(nbytes, dtype=torch.int64)
    data = sflat[(s.unsqueeze(1) + span).reshape(-1)]
    dflat[(d.unsqueeze(1) + span).reshape(-1)] = data


def _idx(t):
    return t.to(torch.int64).reshape(-1)


# address functions: (index tensor, layer) -> byte offsets from the buffer's own base
def _lf(item):
    return lambda idx, layer: idx * item


def _pf(item, layout_dim):
    return lambda idx, layer: idx * layout_dim + layer * item


def _enqueue_items(dev, kernel, src_indices, dst_indices, pairs, layers, nbytes, src_fn, dst_fn,
                   src_tables=(), dst_tables=(), buffers_read=(), buffers_written=()):
    """Queues one op that, for each layer and each (src, dst) pair, copies every item.

    ``pairs``: list of (src_spec, dst_spec); a spec is ("tensor", position in buffers_read /
    buffers_written) or ("table", position in src_tables / dst_tables)."""
    n_sr, n_tr, n_bw = len(buffers_read), len(src_tables), len(buffers_written)

    def run(si, di, *rest):
        reads = rest[: n_sr]
        stabs = rest[n_sr: n_sr + n_tr]
        writes = rest[n_sr + n_tr: n_sr + n_tr + n_bw]
        dtabs = rest[n_sr + n_tr + n_bw:]
        s_idx, d_idx = _idx(si), _idx(di)
        s_tab = [_resolve_table(dev, kernel, t, len(layers) + layers[0]) for t in stabs]
        d_tab = [_resolve_table(dev, kernel, t, len(layers) + layers[0]) for t in dtabs]
        for layer in layers:
            for (skind, spos), (dkind, dpos) in pairs:
                src = _bytes_of(reads[spos]) if skind == "tensor" else s_tab[spos][layer]
                dst = _bytes_of(writes[dpos]) if dkind == "tensor" else d_tab[dpos][layer]
                s_layer = layer if skind == "tensor" else 0
                d_layer = layer if dkind == "tensor" else 0
                _copy_items(dev, kernel, src, src_fn(s_idx, s_layer), dst, dst_fn(d_idx, d_layer), nbytes)

    dev.submit(run, reads=(src_indices, dst_indices) + tuple(buffers_read) + tuple(src_tables),
               writes=tuple(buffers_written) + tuple(dst_tables), name=kernel)


# ---- sgl_kernel.kvcacheio: "kernel" io backend ---------------------------------------------------

def _kv_pairs(mla):
    return [(("tensor", 0), ("tensor", 0))] if mla else [(("tensor", 0), ("tensor", 0)),
                                                          (("tensor", 1), ("tensor", 1))]


def make_kernels(dev):
    k = {}

    def transfer_kv_per_layer(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, item_size,
                              block_quota=2, num_warps_per_block=32):
        name = "transfer_kv_per_layer"
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        for t, w in ((src_k, "src_k"), (dst_k, "dst_k"), (src_v, "src_v"), (dst_v, "dst_v")):
            _check_buffer(dev, name, t, w)
        _enqueue_items(dev, name, src_indices, dst_indices, _kv_pairs(False), [0], item_size,
                       _lf(item_size), _lf(item_size), buffers_read=(src_k, src_v),
                       buffers_written=(dst_k, dst_v))

    def transfer_kv_per_layer_pf_lf(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, layer_id,
                                    item_size, src_layout_dim, block_quota=2, num_warps_per_block=32):
        name = "transfer_kv_per_layer_pf_lf"
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        for t, w in ((src_k, "src_k"), (dst_k, "dst_k"), (src_v, "src_v"), (dst_v, "dst_v")):
            _check_buffer(dev, name, t, w)
        src_fn = lambda idx, _l: idx * src_layout_dim + layer_id * item_size  # noqa: E731
        _enqueue_items(dev, name, src_indices, dst_indices, _kv_pairs(False), [0], item_size,
                       src_fn, _lf(item_size), buffers_read=(src_k, src_v), buffers_written=(dst_k, dst_v))

    def transfer_kv_per_layer_mla(src, dst, src_indices, dst_indices, item_size, block_quota=2,
                                  num_warps_per_block=32):
        name = "transfer_kv_per_layer_mla"
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        _check_buffer(dev, name, src, "src")
        _check_buffer(dev, name, dst, "dst")
        _enqueue_items(dev, name, src_indices, dst_indices, _kv_pairs(True), [0], item_size,
                       _lf(item_size), _lf(item_size), buffers_read=(src,), buffers_written=(dst,))

    def transfer_kv_per_layer_mla_pf_lf(src, dst, src_indices, dst_indices, layer_id, item_size,
                                        src_layout_dim, block_quota=2, num_warps_per_block=32,
                                        _name="transfer_kv_per_layer_mla_pf_lf", _item_check=True):
        _check_indices(dev, _name, src_indices, dst_indices)
        if _item_check:
            _check_item(dev, _name, item_size)
        _check_buffer(dev, _name, src, "src")
        _check_buffer(dev, _name, dst, "dst")
        src_fn = lambda idx, _l: idx * src_layout_dim + layer_id * item_size  # noqa: E731
        _enqueue_items(dev, _name, src_indices, dst_indices, _kv_pairs(True), [0], item_size,
                       src_fn, _lf(item_size), buffers_read=(src,), buffers_written=(dst,))

    def transfer_kv_all_layer(src_k_layers, dst_k_layers, src_v_layers, dst_v_layers, src_indices,
                              dst_indices, item_size, num_layers, block_quota=2, num_warps_per_block=32):
        name = "transfer_kv_all_layer"
        _check_table(dev, name, src_k_layers, num_layers, "source k")
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        for t, w in ((dst_k_layers, "destination k"), (src_v_layers, "source v"),
                     (dst_v_layers, "destination v")):
            _check_table(dev, name, t, num_layers, w)
        pairs = [(("table", 0), ("table", 0)), (("table", 1), ("table", 1))]
        _enqueue_items(dev, name, src_indices, dst_indices, pairs, list(range(num_layers)), item_size,
                       _lf(item_size), _lf(item_size), src_tables=(src_k_layers, src_v_layers),
                       dst_tables=(dst_k_layers, dst_v_layers))

    def transfer_kv_all_layer_lf_pf(src_k_layers, dst_k, src_v_layers, dst_v, src_indices, dst_indices,
                                    item_size, dst_layout_dim, num_layers, block_quota=2,
                                    num_warps_per_block=32):
        name = "transfer_kv_all_layer_lf_pf"
        _check_table(dev, name, src_k_layers, num_layers, "source k")
        _check_table(dev, name, src_v_layers, num_layers, "source v")
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        _check_buffer(dev, name, dst_k, "dst_k")
        _check_buffer(dev, name, dst_v, "dst_v")
        pairs = [(("table", 0), ("tensor", 0)), (("table", 1), ("tensor", 1))]
        _enqueue_items(dev, name, src_indices, dst_indices, pairs, list(range(num_layers)), item_size,
                       _lf(item_size), _pf(item_size, dst_layout_dim),
                       src_tables=(src_k_layers, src_v_layers), buffers_written=(dst_k, dst_v))

    def transfer_kv_all_layer_mla(src_layers, dst_layers, src_indices, dst_indices, item_size, num_layers,
                                  block_quota=2, num_warps_per_block=32):
        name = "transfer_kv_all_layer_mla"
        _check_table(dev, name, src_layers, num_layers, "source")
        _check_table(dev, name, dst_layers, num_layers, "destination")
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        pairs = [(("table", 0), ("table", 0))]
        _enqueue_items(dev, name, src_indices, dst_indices, pairs, list(range(num_layers)), item_size,
                       _lf(item_size), _lf(item_size), src_tables=(src_layers,), dst_tables=(dst_layers,))

    def transfer_kv_all_layer_mla_lf_pf(src_layers, dst, src_indices, dst_indices, item_size,
                                        dst_layout_dim, num_layers, block_quota=2, num_warps_per_block=32,
                                        _name="transfer_kv_all_layer_mla_lf_pf", _item_check=True):
        _check_table(dev, _name, src_layers, num_layers, "source")
        _check_indices(dev, _name, src_indices, dst_indices)
        if _item_check:
            _check_item(dev, _name, item_size)
        _check_buffer(dev, _name, dst, "dst")
        pairs = [(("table", 0), ("tensor", 0))]
        _enqueue_items(dev, _name, src_indices, dst_indices, pairs, list(range(num_layers)), item_size,
                       _lf(item_size), _pf(item_size, dst_layout_dim), src_tables=(src_layers,),
                       buffers_written=(dst,))

    # page-head: one copy per head of item_size / head_num bytes
    def _ph(page_dim, page_size, head_num, item_size, head):
        def fn(idx, layer):
            return ((idx // page_size) * page_size * page_dim + page_dim // head_num * head * page_size
                    + (idx % page_size) * (page_dim // head_num) + layer * item_size // head_num)
        return fn

    def _per_head_lf(item_size, head_num, head):
        return lambda idx, layer: idx * item_size + item_size // head_num * head

    def transfer_kv_per_layer_ph_lf(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, layer_id,
                                    item_size, src_layout_dim, page_size, head_num, block_quota=2,
                                    num_warps_per_block=32):
        name = "transfer_kv_per_layer_ph_lf"
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        for t, w in ((src_k, "src_k"), (dst_k, "dst_k"), (src_v, "src_v"), (dst_v, "dst_v")):
            _check_buffer(dev, name, t, w)
        for h in range(head_num):
            src_fn = (lambda f: (lambda idx, _l: f(idx, layer_id)))(
                _ph(src_layout_dim, page_size, head_num, item_size, h))
            _enqueue_items(dev, f"{name}[head {h}]", src_indices, dst_indices, _kv_pairs(False), [0],
                           item_size // head_num, src_fn, _per_head_lf(item_size, head_num, h),
                           buffers_read=(src_k, src_v), buffers_written=(dst_k, dst_v))

    def transfer_kv_all_layer_lf_ph(src_k_layers, dst_k, src_v_layers, dst_v, src_indices, dst_indices,
                                    item_size, dst_layout_dim, num_layers, page_size, head_num,
                                    block_quota=2, num_warps_per_block=32):
        name = "transfer_kv_all_layer_lf_ph"
        _check_table(dev, name, src_k_layers, num_layers, "source k")
        _check_table(dev, name, src_v_layers, num_layers, "source v")
        _check_indices(dev, name, src_indices, dst_indices)
        _check_item(dev, name, item_size)
        _check_buffer(dev, name, dst_k, "dst_k")
        _check_buffer(dev, name, dst_v, "dst_v")
        pairs = [(("table", 0), ("tensor", 0)), (("table", 1), ("tensor", 1))]
        for h in range(head_num):
            _enqueue_items(dev, f"{name}[head {h}]", src_indices, dst_indices, pairs,
                           list(range(num_layers)), item_size // head_num,
                           _per_head_lf(item_size, head_num, h),
                           _ph(dst_layout_dim, page_size, head_num, item_size, h),
                           src_tables=(src_k_layers, src_v_layers), buffers_written=(dst_k, dst_v))

    # ---- "direct" io backend: host-side index walk, stream-ordered copies of whole rows --------
    def _direct_common(name, src_indices, dst_indices, page_size):
        if src_indices.numel() != dst_indices.numel():
            _fail(dev, name, "Source and destination indices must have the same length")
        if page_size <= 0:
            _fail(dev, name, "Page size must be positive")
        if src_indices.numel() % page_size != 0:
            _fail(dev, name, "Source indices size must be divisible by page size")
        # The real kernel reads the indices on the host (`.cpu()`), at the call.
        return [int(x) for x in dev.copy_to_host(src_indices).tolist()], \
               [int(x) for x in dev.copy_to_host(dst_indices).tolist()]

    def _submit_copies(name, srcs, dsts, plan):
        """plan: [(src position, src selector, dst position, dst selector)], selectors being
        tuples of ("select", dim, i) / ("slice", start, length) applied in order."""
        def apply(t, sel):
            for kind, a, b in sel:
                t = t.select(a, b) if kind == "select" else t.narrow(0, a, b)
            return t

        def run(*bufs):
            ss, ds = bufs[: len(srcs)], bufs[len(srcs):]
            for sp, ssel, dp, dsel in plan:
                apply(ds[dp], dsel).copy_(apply(ss[sp], ssel))

        dev.submit(run, reads=tuple(srcs), writes=tuple(dsts), name=name)

    def transfer_kv_direct(src_layers, dst_layers, src_indices, dst_indices, page_size):
        name = "transfer_kv_direct"
        if len(src_layers) != len(dst_layers):
            _fail(dev, name, "Source and destination layers must have the same number of layers")
        s_idx, d_idx = _direct_common(name, src_indices, dst_indices, page_size)
        plan, start = [], 0
        for i in range(len(s_idx)):
            if i < len(s_idx) - 1 and s_idx[i + 1] - s_idx[i] == 1 and d_idx[i + 1] - d_idx[i] == 1:
                continue
            n = i + 1 - start
            for j in range(len(src_layers)):
                plan.append((j, (("slice", s_idx[start], n),), j, (("slice", d_idx[start], n),)))
            start = i + 1
        _submit_copies(name, list(src_layers), list(dst_layers), plan)

    def transfer_kv_per_layer_direct_pf_lf(src_ptrs, dst_ptrs, src_indices, dst_indices, layer_id,
                                           page_size):
        name = "transfer_kv_per_layer_direct_pf_lf"
        s_idx, d_idx = _direct_common(name, src_indices, dst_indices, page_size)
        mla = len(src_ptrs) == 1
        num_layers = len(dst_ptrs) if mla else len(dst_ptrs) // 2
        plan = []
        for i in range(len(s_idx) // page_size):
            s, d = s_idx[i * page_size] // page_size, d_idx[i * page_size]
            for j in range(num_layers):
                for kv in ((0,) if mla else (0, 1)):
                    plan.append((kv, (("select", 0, s), ("select", 0, layer_id + j)),
                                 j + kv * num_layers, (("slice", d, page_size),)))
        _submit_copies(name, list(src_ptrs), list(dst_ptrs), plan)

    def transfer_kv_all_layer_direct_lf_pf(src_ptrs, dst_ptrs, src_indices, dst_indices, page_size):
        name = "transfer_kv_all_layer_direct_lf_pf"
        s_idx, d_idx = _direct_common(name, src_indices, dst_indices, page_size)
        mla = len(dst_ptrs) == 1
        num_layers = len(src_ptrs) if mla else len(src_ptrs) // 2
        plan = []
        for i in range(len(s_idx) // page_size):
            s, d = s_idx[i * page_size], d_idx[i * page_size] // page_size
            for j in range(num_layers):
                for kv in ((0,) if mla else (0, 1)):
                    plan.append((j + kv * num_layers, (("slice", s, page_size),),
                                 kv, (("select", 0, d), ("select", 0, j))))
        _submit_copies(name, list(src_ptrs), list(dst_ptrs), plan)

    # ---- Mamba state transfers (sglang.kernels.ops.mamba.transfer_mamba) ----------------------
    def transfer_kv_mamba_pf_lf(src, dst, src_indices, dst_indices, layer_id, item_size, src_layout_dim):
        transfer_kv_per_layer_mla_pf_lf(src, dst, src_indices, dst_indices, layer_id, item_size,
                                        src_layout_dim, _name="transfer_kv_mamba_pf_lf", _item_check=False)

    def transfer_kv_mamba_lf_pf(src_ptrs, dst, src_indices, dst_indices, item_size, dst_layout_dim,
                                num_layers):
        transfer_kv_all_layer_mla_lf_pf(src_ptrs, dst, src_indices, dst_indices, item_size, dst_layout_dim,
                                        num_layers, _name="transfer_kv_mamba_lf_pf", _item_check=False)

    # ---- JIT hicache kernels (sglang.jit_kernel.hicache / sglang.kernels.ops.kvcache.hicache) --
    jit_state = {"available": False}

    def can_use_hicache_jit_kernel(*args, **kwargs):
        return jit_state["available"]

    def can_use_write_back_jit_kernel(*args, **kwargs):
        return False  # the staged write-back kernels are not emulated

    def _jit_indices(name, indices_dst, indices_src):
        _check_indices(dev, name, indices_src, indices_dst, dtypes=(torch.int64, torch.int32))

    def _rows(name, dsts, srcs, indices_dst, indices_src):
        def run(si, di, *bufs):
            ss, ds = bufs[: len(srcs)], bufs[len(srcs):]
            s_idx, d_idx = _idx(si), _idx(di)
            for s, d in zip(ss, ds):
                for side, idx, t in (("source", s_idx, s), ("destination", d_idx, d)):
                    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= t.size(0)):
                        _illegal(dev, name, f"{side} index outside [0, {t.size(0)})")
                d[d_idx] = s[s_idx]

        dev.submit(run, reads=(indices_src, indices_dst) + tuple(srcs), writes=tuple(dsts), name=name)

    def transfer_hicache_one_layer(k_cache_dst, v_cache_dst, k_cache_src, v_cache_src, indices_dst,
                                   indices_src, element_dim=None, **kwargs):
        name = "transfer_hicache_one_layer"
        _jit_indices(name, indices_dst, indices_src)
        _rows(name, (k_cache_dst, v_cache_dst), (k_cache_src, v_cache_src), indices_dst, indices_src)

    def transfer_hicache_one_layer_mla(cache_dst, cache_src, indices_dst, indices_src, element_dim=None,
                                       **kwargs):
        name = "transfer_hicache_one_layer_mla"
        _jit_indices(name, indices_dst, indices_src)
        _rows(name, (cache_dst,), (cache_src,), indices_dst, indices_src)

    def transfer_hicache_all_layer(k_ptr_dst, v_ptr_dst, indices_dst, k_ptr_src, v_ptr_src, indices_src,
                                   kv_cache_dst_stride_bytes, kv_cache_src_stride_bytes, element_size,
                                   **kwargs):
        name = "transfer_hicache_all_layer"
        _jit_indices(name, indices_dst, indices_src)
        n = k_ptr_src.numel()
        pairs = [(("table", 0), ("table", 0)), (("table", 1), ("table", 1))]
        _enqueue_items(dev, name, indices_src, indices_dst, pairs, list(range(n)), element_size,
                       _lf(kv_cache_src_stride_bytes), _lf(kv_cache_dst_stride_bytes),
                       src_tables=(k_ptr_src, v_ptr_src), dst_tables=(k_ptr_dst, v_ptr_dst))

    def transfer_hicache_all_layer_mla(ptr_dst, indices_dst, ptr_src, indices_src, cache_dst_stride_bytes,
                                       cache_src_stride_bytes, element_size, **kwargs):
        name = "transfer_hicache_all_layer_mla"
        _jit_indices(name, indices_dst, indices_src)
        pairs = [(("table", 0), ("table", 0))]
        _enqueue_items(dev, name, indices_src, indices_dst, pairs, list(range(ptr_src.numel())),
                       element_size, _lf(cache_src_stride_bytes), _lf(cache_dst_stride_bytes),
                       src_tables=(ptr_src,), dst_tables=(ptr_dst,))

    for fn in (transfer_kv_per_layer, transfer_kv_per_layer_pf_lf, transfer_kv_per_layer_ph_lf,
               transfer_kv_per_layer_mla, transfer_kv_per_layer_mla_pf_lf, transfer_kv_all_layer,
               transfer_kv_all_layer_lf_pf, transfer_kv_all_layer_lf_ph, transfer_kv_all_layer_mla,
               transfer_kv_all_layer_mla_lf_pf, transfer_kv_direct, transfer_kv_per_layer_direct_pf_lf,
               transfer_kv_all_layer_direct_lf_pf, transfer_kv_mamba_pf_lf, transfer_kv_mamba_lf_pf,
               can_use_hicache_jit_kernel, can_use_write_back_jit_kernel, transfer_hicache_one_layer,
               transfer_hicache_one_layer_mla, transfer_hicache_all_layer, transfer_hicache_all_layer_mla):
        k[fn.__name__] = fn
    k["_jit_state"] = jit_state
    return k


KVCACHEIO = ("transfer_kv_per_layer", "transfer_kv_per_layer_pf_lf", "transfer_kv_per_layer_ph_lf",
             "transfer_kv_per_layer_mla", "transfer_kv_per_layer_mla_pf_lf", "transfer_kv_all_layer",
             "transfer_kv_all_layer_lf_pf", "transfer_kv_all_layer_lf_ph", "transfer_kv_all_layer_mla",
             "transfer_kv_all_layer_mla_lf_pf", "transfer_kv_direct", "transfer_kv_per_layer_direct_pf_lf",
             "transfer_kv_all_layer_direct_lf_pf")
JIT_HICACHE = ("can_use_hicache_jit_kernel", "can_use_write_back_jit_kernel", "transfer_hicache_one_layer",
               "transfer_hicache_one_layer_mla", "transfer_hicache_all_layer", "transfer_hicache_all_layer_mla")
MAMBA = ("transfer_kv_mamba_pf_lf", "transfer_kv_mamba_lf_pf")


def module_for(dev, part="all", jit_available=False):
    """A module object with the fake kernels of ``dev`` under SGLang's names.

    part: "kvcacheio" (sgl_kernel.kvcacheio), "jit_hicache" (the JIT hicache module of either era),
    "mamba" (transfer_mamba), or "all". jit_available: what can_use_hicache_jit_kernel answers."""
    cache = dev.__dict__.setdefault("_fake_kernels", {})
    if "all" not in cache:
        cache["all"] = make_kernels(dev)
    kernels = cache["all"]
    kernels["_jit_state"]["available"] = bool(jit_available)
    names = {"kvcacheio": KVCACHEIO, "jit_hicache": JIT_HICACHE, "mamba": MAMBA,
             "all": KVCACHEIO + JIT_HICACHE + MAMBA}[part]
    mod = types.ModuleType(f"kvsim.fakecuda.kernels[{part}]")
    for n in names:
        setattr(mod, n, kernels[n])
    mod.FakeCudaError = FakeCudaError
    return mod
