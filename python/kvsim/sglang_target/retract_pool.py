"""The device pool for a sparse-index (NSA / DSA) scenario: SGLang's own NSATokenToKVPool (named
DSATokenToKVPool from August 2026), whose get_cpu_copy / load_cpu_copy retract and resume call.

SGLang's constructor needs the runtime's memory saver and custom memory pool, which the loader
does not emulate; when it fails, the pool is an instance of a subclass of SGLang's class whose
only own code is the constructor below (the attributes SGLang's constructors set, buffers in the
shapes they allocate). Every other method — get_cpu_copy, load_cpu_copy, the buffer getters — is
SGLang's, so a bug in them runs as written.

The latent KV row of a token (kv_buffer[layer][slot], width kv_cache_dim) holds the content
function's K in its first head_dim values and V in the rest: `k_buffer` / `v_buffer` are views
of those halves, so the driver's KV writes and reads (and the content checks) work unchanged.

The index-with-scale buffer is page-indexed: row p of a layer holds page p's 64 tokens' 128
index bytes each, then their 4 scale bytes each (SGLang's layout comment in memory_pool.py).
`write_index` / `read_index` put and read one token's 132 bytes at its slot; the bytes are a
pure function of the token's prefix hash and the layer (`expected_index`)."""

import torch

NSA_PAGE_SIZE = 64  # SGLang's NSA pool asserts page_size 64 on CUDA
INDEX_HEAD_DIM = 128  # and index_head_dim 128
QUANT_BLOCK = 128
INDEX_BYTES = INDEX_HEAD_DIM  # fp8 index key bytes per token
SCALE_BYTES = INDEX_HEAD_DIM // QUANT_BLOCK * 4  # fp32 scale bytes per token


def nsa_class(mem_pool_module):
    """SGLang's sparse-attention pool class in this tree, or None."""
    for name in ("NSATokenToKVPool", "DSATokenToKVPool"):
        cls = getattr(mem_pool_module, name, None)
        if isinstance(cls, type):
            return cls
    return None


def build_nsa_pool(nsa_cls, *, size, page_size, head_dim, layer_num, dtype=torch.float32):
    """(pool, how): how is "sglang" when SGLang's constructor ran, else "stand-in constructor:
    <why>"."""
    if page_size != NSA_PAGE_SIZE:
        raise ValueError(f"SGLang's NSA pool needs page_size {NSA_PAGE_SIZE}, got {page_size}")
    methods = {"k_buffer": property(lambda self: [b[:, :, :self.kvsim_head_dim] for b in self.kv_buffer]),
               "v_buffer": property(lambda self: [b[:, :, self.kvsim_head_dim:] for b in self.kv_buffer]),
               "get_key_buffer": _get_key_buffer, "get_value_buffer": _get_value_buffer}
    cls = type(f"Kvsim{nsa_cls.__name__}", (nsa_cls,), methods)
    try:
        pool = cls(size=size, page_size=page_size, kv_lora_rank=head_dim, dtype=dtype,
                   qk_rope_head_dim=head_dim, layer_num=layer_num, device="cuda",
                   index_head_dim=INDEX_HEAD_DIM, enable_memory_saver=False, kv_cache_dim=2 * head_dim)
        how = "sglang"
    except Exception as exc:  # noqa: BLE001 - the stand-in constructor serves; the reason is reported
        how = f"stand-in constructor: {type(exc).__name__}: {str(exc)[:160]}"
        pool = cls.__new__(cls)
        _construct(pool, size, page_size, head_dim, layer_num, dtype)
    pool.kvsim_head_dim = head_dim
    return pool, how


def _get_key_buffer(self, layer_id):
    if self.layer_transfer_counter is not None:
        self.layer_transfer_counter.wait_until(layer_id - self.start_layer)
    return self.kv_buffer[layer_id - self.start_layer][:, :, :self.kvsim_head_dim]


def _get_value_buffer(self, layer_id):
    if self.layer_transfer_counter is not None:
        self.layer_transfer_counter.wait_until(layer_id - self.start_layer)
    return self.kv_buffer[layer_id - self.start_layer][:, :, self.kvsim_head_dim:]


def _construct(pool, size, page_size, head_dim, layer_num, dtype):
    """What KVCache, MLATokenToKVPool and NSATokenToKVPool's constructors set (April-August 2026)."""
    pool.size = size
    pool.page_size = page_size
    pool.dtype = pool.store_dtype = dtype
    pool.device = "cuda"
    pool.layer_num = layer_num
    pool.start_layer, pool.end_layer = 0, layer_num - 1
    pool.mem_usage = 0
    pool.cpu_offloading_chunk_size = 8192
    pool.layer_transfer_counter = None
    pool.enable_custom_mem_pool, pool.custom_mem_pool = False, None
    pool.kv_lora_rank = pool.qk_rope_head_dim = head_dim
    pool.use_nsa = pool.use_dsa = True
    pool.nsa_kv_cache_store_fp8 = False
    pool.kv_cache_dim = 2 * head_dim
    pool.kv_buffer = [torch.zeros((size + page_size, 1, 2 * head_dim), dtype=dtype, device="cuda")
                      for _ in range(layer_num)]
    pool.data_ptrs = torch.tensor([x.data_ptr() for x in pool.kv_buffer], dtype=torch.uint64, device="cuda")
    pool.index_head_dim = INDEX_HEAD_DIM
    pool.index_buf_size = size
    pages = (size + page_size + 1) // page_size
    pool.index_k_with_scale_buffer = [
        torch.zeros((pages, page_size * (INDEX_BYTES + SCALE_BYTES)), dtype=torch.uint8, device="cuda")
        for _ in range(layer_num)]


def has_index(pool):
    return hasattr(pool, "index_k_with_scale_buffer")


def _flat_offsets(pool, slots):
    """(data offsets [n, 128], scale offsets [n, 4]) into a layer's flattened index buffer."""
    ps = pool.page_size
    row = ps * (INDEX_BYTES + SCALE_BYTES)
    s = slots.to(torch.int64).cpu()
    base = (s // ps) * row
    off = s % ps
    data = (base + off * INDEX_BYTES).view(-1, 1) + torch.arange(INDEX_BYTES).view(1, -1)
    scale = (base + ps * INDEX_BYTES + off * SCALE_BYTES).view(-1, 1) + torch.arange(SCALE_BYTES).view(1, -1)
    return data, scale


def expected_index(hashes, layer):
    """[n, 132] uint8: the index key and scale bytes of the positions with these prefix hashes."""
    h = torch.tensor([x & 0xFFFFFF for x in hashes], dtype=torch.int64).view(-1, 1)
    j = torch.arange(INDEX_BYTES + SCALE_BYTES, dtype=torch.int64).view(1, -1)
    return ((h * 131 + j * 7 + layer * 61 + (h >> 8) * (j + 1)) % 251).to(torch.uint8)


def write_index(pool, slots, hashes):
    """The model's indexer writes each token's key and scale (SGLang's set_index_k_scale_buffer
    layout) in every layer."""
    if not len(hashes):
        return
    data, scale = _flat_offsets(pool, slots)
    for layer in range(pool.layer_num):
        want = expected_index(hashes, layer)
        flat = pool.index_k_with_scale_buffer[layer].view(-1)
        flat[data.reshape(-1).to("cuda")] = want[:, :INDEX_BYTES].reshape(-1).to("cuda")
        flat[scale.reshape(-1).to("cuda")] = want[:, INDEX_BYTES:].reshape(-1).to("cuda")


def check_index(pool, slots, hashes, what):
    """None, or a description of the first position whose index bytes differ from the content
    function."""
    if not len(hashes):
        return None
    data, scale = _flat_offsets(pool, slots)
    for layer in range(pool.layer_num):
        flat = pool.index_k_with_scale_buffer[layer].view(-1)
        got = torch.cat([flat[data.reshape(-1).to("cuda")].cpu().view(-1, INDEX_BYTES),
                         flat[scale.reshape(-1).to("cuda")].cpu().view(-1, SCALE_BYTES)], dim=1)
        want = expected_index(hashes, layer)
        if not torch.equal(got, want):
            bad = (got != want).any(dim=1).nonzero().flatten()
            return (f"{what}: index-with-scale bytes of {len(bad)} of {len(hashes)} positions in layer "
                    f"{layer} differ from the content function (first at position {int(bad[0])}, "
                    f"slot {int(slots[int(bad[0])])})")
    return None
