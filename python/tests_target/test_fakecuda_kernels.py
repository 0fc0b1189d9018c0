"""kvsim.fakecuda.kernels: every fake transfer kernel copies the right bytes for its host layout
and rejects what SGLang's CUDA kernels reject."""

import pytest
import torch

from test_fakecuda_import import load_fakecuda

fc = load_fakecuda()

L, SIZE, H, D, PS = 2, 16, 2, 4, 4        # layers, device tokens, heads, head dim, page size
HSIZE = 16                                # host tokens
ITEM = H * D * 4                          # bytes per token per layer (float32)


@pytest.fixture
def env():
    dev = fc.FakeDevice(seed=1)
    with dev.install():
        g = torch.Generator().manual_seed(5)
        k = [torch.randn(SIZE, H, D, generator=g).cuda() for _ in range(L)]
        v = [torch.randn(SIZE, H, D, generator=g).cuda() for _ in range(L)]
        ptrs = lambda xs: torch.tensor([x.data_ptr() for x in xs], dtype=torch.uint64, device="cuda")  # noqa
        yield dev, fc.kernels.module_for(dev), k, v, ptrs


def _idx(values, cuda=True):
    t = torch.tensor(values, dtype=torch.int64)
    return t.cuda() if cuda else t


DEV_IDX = [4, 5, 6, 7, 12, 13, 14, 15]   # two pages
HOST_IDX = [8, 9, 10, 11, 0, 1, 2, 3]


def _on_stream(dev, fn):
    """Runs fn with a fresh side stream current; returns that stream (its work still queued)."""
    s = dev.module.Stream()
    with dev.module.stream(s):
        fn()
    return s


def _zero_device(k, v):
    for x in k + v:
        x.zero_()


def _expect_device(k, v, ref_k, ref_v):
    for layer in range(L):
        for i in range(len(DEV_IDX)):
            assert torch.equal(k[layer].cpu()[DEV_IDX[i]], ref_k[layer][DEV_IDX[i]])
            assert torch.equal(v[layer].cpu()[DEV_IDX[i]], ref_v[layer][DEV_IDX[i]])
        untouched = [j for j in range(SIZE) if j not in DEV_IDX]
        assert (k[layer].cpu()[untouched] == 0).all()


def test_layer_first_all_layer_backup_and_per_layer_load(env):
    dev, m, k, v, ptrs = env
    ref_k, ref_v = [x.cpu() for x in k], [x.cpu() for x in v]
    host = torch.zeros(2, L, HSIZE, H, D, pin_memory=True)
    hk = [host[0][i] for i in range(L)]
    hv = [host[1][i] for i in range(L)]
    s = _on_stream(dev, lambda: m.transfer_kv_all_layer(
        src_k_layers=ptrs(k), dst_k_layers=ptrs(hk), src_v_layers=ptrs(v), dst_v_layers=ptrs(hv),
        src_indices=_idx(DEV_IDX), dst_indices=_idx(HOST_IDX), item_size=ITEM, num_layers=L))
    # queued on s: the two index uploads (.cuda() inside the stream context) and the kernel
    assert dev.pending(s) == 3 and (host == 0).all()
    assert dev.step(s, 2) == 2 and (host == 0).all()
    dev.step(s)
    for layer in range(L):
        assert torch.equal(host[0][layer][HOST_IDX], ref_k[layer][DEV_IDX])
        assert torch.equal(host[1][layer][HOST_IDX], ref_v[layer][DEV_IDX])
    _zero_device(k, v)
    for layer in range(L):
        _on_stream(dev, lambda: m.transfer_kv_per_layer(
            src_k=host[0][layer], dst_k=k[layer], src_v=host[1][layer], dst_v=v[layer],
            src_indices=_idx(HOST_IDX), dst_indices=_idx(DEV_IDX), item_size=ITEM))
    dev.drain()
    _expect_device(k, v, ref_k, ref_v)
    assert dev.violations == []


def test_page_first_backup_and_load(env):
    dev, m, k, v, ptrs = env
    ref_k, ref_v = [x.cpu() for x in k], [x.cpu() for x in v]
    host = torch.zeros(2, HSIZE, L, H, D, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_all_layer_lf_pf(
        src_k_layers=ptrs(k), dst_k=host[0], src_v_layers=ptrs(v), dst_v=host[1],
        src_indices=_idx(DEV_IDX), dst_indices=_idx(HOST_IDX), item_size=ITEM,
        dst_layout_dim=ITEM * L, num_layers=L))
    dev.drain()
    for layer in range(L):
        assert torch.equal(host[0][HOST_IDX, layer], ref_k[layer][DEV_IDX])
        assert torch.equal(host[1][HOST_IDX, layer], ref_v[layer][DEV_IDX])
    _zero_device(k, v)
    for layer in range(L):
        _on_stream(dev, lambda: m.transfer_kv_per_layer_pf_lf(
            src_k=host[0], dst_k=k[layer], src_v=host[1], dst_v=v[layer], src_indices=_idx(HOST_IDX),
            dst_indices=_idx(DEV_IDX), layer_id=layer, item_size=ITEM, src_layout_dim=ITEM * L))
    dev.drain()
    _expect_device(k, v, ref_k, ref_v)


def test_page_head_backup_and_load(env):
    dev, m, k, v, ptrs = env
    ref_k, ref_v = [x.cpu() for x in k], [x.cpu() for x in v]
    host = torch.zeros(2, HSIZE // PS, H, PS, L, D, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_all_layer_lf_ph(
        src_k_layers=ptrs(k), dst_k=host[0], src_v_layers=ptrs(v), dst_v=host[1],
        src_indices=_idx(DEV_IDX), dst_indices=_idx(HOST_IDX), item_size=ITEM, dst_layout_dim=ITEM * L,
        num_layers=L, page_size=PS, head_num=H))
    dev.drain()
    for layer in range(L):
        for hi, di in zip(HOST_IDX, DEV_IDX):
            for h in range(H):
                assert torch.equal(host[0][hi // PS, h, hi % PS, layer], ref_k[layer][di, h])
                assert torch.equal(host[1][hi // PS, h, hi % PS, layer], ref_v[layer][di, h])
    _zero_device(k, v)
    for layer in range(L):
        _on_stream(dev, lambda: m.transfer_kv_per_layer_ph_lf(
            src_k=host[0], dst_k=k[layer], src_v=host[1], dst_v=v[layer], src_indices=_idx(HOST_IDX),
            dst_indices=_idx(DEV_IDX), layer_id=layer, item_size=ITEM, src_layout_dim=ITEM * L,
            page_size=PS, head_num=H))
    dev.drain()
    _expect_device(k, v, ref_k, ref_v)


def test_direct_layer_first_and_page_first_direct(env):
    dev, m, k, v, ptrs = env
    ref_k, ref_v = [x.cpu() for x in k], [x.cpu() for x in v]
    # layer_first + direct: host indices stay on the host
    host = torch.zeros(2, L, HSIZE, H, D, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_direct(
        src_layers=k + v, dst_layers=[host[0][i] for i in range(L)] + [host[1][i] for i in range(L)],
        src_indices=_idx(DEV_IDX, cuda=False), dst_indices=_idx(HOST_IDX, cuda=False), page_size=PS))
    dev.drain()
    for layer in range(L):
        assert torch.equal(host[0][layer][HOST_IDX], ref_k[layer][DEV_IDX])
    # page_first_direct: [page, layer, token-in-page, head, dim]
    pfd = torch.zeros(2, HSIZE // PS, L, PS, H, D, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_all_layer_direct_lf_pf(
        src_ptrs=k + v, dst_ptrs=[pfd[0], pfd[1]], src_indices=_idx(DEV_IDX, cuda=False),
        dst_indices=_idx(HOST_IDX, cuda=False), page_size=PS))
    dev.drain()
    for layer in range(L):
        for hi, di in zip(HOST_IDX, DEV_IDX):
            assert torch.equal(pfd[0][hi // PS, layer, hi % PS], ref_k[layer][di])
            assert torch.equal(pfd[1][hi // PS, layer, hi % PS], ref_v[layer][di])
    _zero_device(k, v)
    for layer in range(L):
        _on_stream(dev, lambda: m.transfer_kv_per_layer_direct_pf_lf(
            src_ptrs=[pfd[0], pfd[1]], dst_ptrs=[k[layer], v[layer]], src_indices=_idx(HOST_IDX, cuda=False),
            dst_indices=_idx(DEV_IDX, cuda=False), layer_id=layer, page_size=PS))
    dev.drain()
    _expect_device(k, v, ref_k, ref_v)


def test_mla_layer_first_and_page_first(env):
    dev, m, _k, _v, ptrs = env
    dim = 6  # 24 bytes per token
    kv = [torch.randn(SIZE, 1, dim).cuda() for _ in range(L)]
    ref = [x.cpu() for x in kv]
    item = dim * 4
    lf = torch.zeros(L, HSIZE, 1, dim, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_all_layer_mla(
        src_layers=ptrs(kv), dst_layers=ptrs([lf[i] for i in range(L)]), src_indices=_idx(DEV_IDX),
        dst_indices=_idx(HOST_IDX), item_size=item, num_layers=L))
    pf = torch.zeros(HSIZE, L, 1, dim, pin_memory=True)
    _on_stream(dev, lambda: m.transfer_kv_all_layer_mla_lf_pf(
        src_layers=ptrs(kv), dst=pf, src_indices=_idx(DEV_IDX), dst_indices=_idx(HOST_IDX),
        item_size=item, dst_layout_dim=item * L, num_layers=L))
    dev.drain()
    for layer in range(L):
        assert torch.equal(lf[layer][HOST_IDX], ref[layer][DEV_IDX])
        assert torch.equal(pf[HOST_IDX, layer], ref[layer][DEV_IDX])
    for layer in range(L):
        kv[layer].zero_()
        _on_stream(dev, lambda: m.transfer_kv_per_layer_mla(
            src=lf[layer], dst=kv[layer], src_indices=_idx(HOST_IDX), dst_indices=_idx(DEV_IDX),
            item_size=item))
    dev.drain()
    for layer in range(L):
        assert torch.equal(kv[layer].cpu()[DEV_IDX], ref[layer][DEV_IDX])
        kv[layer].zero_()
        _on_stream(dev, lambda: m.transfer_kv_per_layer_mla_pf_lf(
            src=pf, dst=kv[layer], src_indices=_idx(HOST_IDX), dst_indices=_idx(DEV_IDX), layer_id=layer,
            item_size=item, src_layout_dim=item * L))
    dev.drain()
    for layer in range(L):
        assert torch.equal(kv[layer].cpu()[DEV_IDX], ref[layer][DEV_IDX])


def test_mamba_state_transfers(env):
    dev, m, _k, _v, ptrs = env
    slots, host_slots, elems = 4, 6, 3          # 6-byte states: not a multiple of 8, allowed here
    state = [torch.randint(0, 100, (slots, elems), dtype=torch.int16).cuda() for _ in range(L)]
    ref = [x.cpu() for x in state]
    host = torch.zeros(host_slots, L, elems, dtype=torch.int16, pin_memory=True)
    item = elems * 2
    _on_stream(dev, lambda: m.transfer_kv_mamba_lf_pf(
        src_ptrs=ptrs(state), dst=host, src_indices=_idx([1, 3]), dst_indices=_idx([5, 0]),
        item_size=item, dst_layout_dim=item * L, num_layers=L))
    dev.drain()
    for layer in range(L):
        assert torch.equal(host[[5, 0], layer], ref[layer][[1, 3]])
        state[layer].zero_()
        _on_stream(dev, lambda: m.transfer_kv_mamba_pf_lf(
            src=host, dst=state[layer], src_indices=_idx([5, 0]), dst_indices=_idx([2, 0]),
            layer_id=layer, item_size=item, src_layout_dim=item * L))
    dev.drain()
    for layer in range(L):
        assert torch.equal(state[layer].cpu()[[2, 0]], ref[layer][[1, 3]])


def test_jit_kernels_copy_rows_and_tables(env):
    dev, m, k, v, ptrs = env
    jit = fc.kernels.module_for(dev, "jit_hicache", jit_available=True)
    assert jit.can_use_hicache_jit_kernel(element_size=ITEM) and not jit.can_use_write_back_jit_kernel()
    ref_k, ref_v = [x.cpu() for x in k], [x.cpu() for x in v]
    host = torch.zeros(2, L, HSIZE, H, D, pin_memory=True)
    hk, hv = [host[0][i] for i in range(L)], [host[1][i] for i in range(L)]
    _on_stream(dev, lambda: jit.transfer_hicache_all_layer(
        k_ptr_dst=ptrs(hk), v_ptr_dst=ptrs(hv), indices_dst=_idx(HOST_IDX), k_ptr_src=ptrs(k),
        v_ptr_src=ptrs(v), indices_src=_idx(DEV_IDX), kv_cache_dst_stride_bytes=ITEM,
        kv_cache_src_stride_bytes=ITEM, element_size=ITEM))
    dev.drain()
    _zero_device(k, v)
    for layer in range(L):
        _on_stream(dev, lambda: jit.transfer_hicache_one_layer(
            k_cache_dst=k[layer], v_cache_dst=v[layer], k_cache_src=hk[layer], v_cache_src=hv[layer],
            indices_dst=_idx(DEV_IDX), indices_src=_idx(HOST_IDX), element_dim=H * D))
    dev.drain()
    _expect_device(k, v, ref_k, ref_v)


@pytest.mark.parametrize("bad, message", [
    ("host_dst", "Destination indices must be a CUDA tensor"),
    ("host_src", "Source indices must be a CUDA tensor"),
    ("int32", "must be of type long"),
    ("length", "same length"),
    ("item", "divisible by 8"),
    ("layers", "does not match num_layers"),
])
def test_kernel_input_checks(env, bad, message):
    dev, m, k, v, ptrs = env
    host = torch.zeros(2, HSIZE, L, H, D, pin_memory=True)
    src_idx, dst_idx = _idx(DEV_IDX), _idx(HOST_IDX)
    item, layers = ITEM, L
    if bad == "host_dst":
        dst_idx = _idx(HOST_IDX, cuda=False)
    elif bad == "host_src":
        src_idx = _idx(DEV_IDX, cuda=False)
    elif bad == "int32":
        dst_idx = dst_idx.to(torch.int32)
    elif bad == "length":
        dst_idx = dst_idx[:-1]
    elif bad == "item":
        item = ITEM - 4
    elif bad == "layers":
        layers = L + 1
    with pytest.raises(RuntimeError, match=message):
        m.transfer_kv_all_layer_lf_pf(
            src_k_layers=ptrs(k), dst_k=host[0], src_v_layers=ptrs(v), dst_v=host[1], src_indices=src_idx,
            dst_indices=dst_idx, item_size=item, dst_layout_dim=ITEM * L, num_layers=layers)
    assert [x.kind for x in dev.violations] == ["kernel_input"]
    assert all(dev.pending(s) == 0 for s in dev.streams)


def test_direct_kernel_checks_page_alignment(env):
    dev, m, k, v, _ptrs = env
    host = torch.zeros(L, HSIZE, H, D, pin_memory=True)
    with pytest.raises(RuntimeError, match="divisible by page size"):
        m.transfer_kv_direct(src_layers=k, dst_layers=[host[i] for i in range(L)],
                             src_indices=_idx([0, 1, 2], cuda=False), dst_indices=_idx([0, 1, 2], cuda=False),
                             page_size=PS)


def test_indices_freed_under_a_queued_kernel_are_caught(env):
    dev, m, k, v, ptrs = env
    host = torch.zeros(2, HSIZE, L, H, D, pin_memory=True)
    src_k, src_v = ptrs(k), ptrs(v)
    moved = [_idx(DEV_IDX), torch.tensor(HOST_IDX).to("cuda", non_blocking=True)]  # default stream
    s = _on_stream(dev, lambda: m.transfer_kv_all_layer_lf_pf(
        src_k_layers=src_k, dst_k=host[0], src_v_layers=src_v, dst_v=host[1],
        src_indices=moved.pop(0), dst_indices=moved.pop(0),
        item_size=ITEM, dst_layout_dim=ITEM * L, num_layers=L))
    # both index tensors were temporaries on the default stream, gone at once: SGLang's
    # start_writing without record_stream
    assert [x.kind for x in dev.violations] == ["stream_lifetime", "stream_lifetime"]
    with pytest.raises(fc.kernels.FakeCudaError, match="illegal memory access"):
        dev.step(s)
    assert dev.violations[-1].kind == "illegal_address"
    assert (host == 0).all()
