"""The device KV pool for the SGLang target: SGLang's own MHATokenToKVPool when it constructs on
the fake device, else a small stand-in that is an instance of that class (HiRadixCache picks its
host pool by isinstance) with the attributes SGLang's host pools and controller read: per-layer
k/v buffers of [size + page_size, head_num, head_dim], their data-pointer tables, the layer range,
and get_key_buffer / get_value_buffer that wait on the layer transfer counter as the real pool's
do (the model's per-layer wait for a load-back)."""

import torch


def build_kv_pool(mha_cls, *, size, page_size, head_dim, layer_num, dtype=torch.float32):
    """(pool, how): how is "sglang" for SGLang's pool, else "stand-in: <why the real one failed>"."""
    try:
        pool = mha_cls(size=size, page_size=page_size, dtype=dtype, head_num=1, head_dim=head_dim,
                       layer_num=layer_num, device="cuda", enable_memory_saver=False,
                       enable_alt_stream=False)
        return pool, "sglang"
    except Exception as exc:  # noqa: BLE001 - the stand-in serves; the reason is reported
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
    methods = {k: v for k, v in vars(_StandinPool).items() if not k.startswith("__")}
    cls = type("KvsimMHATokenToKVPool", (mha_cls,), methods)
    pool = cls.__new__(cls)
    _StandinPool.setup(pool, size, page_size, dtype, head_dim, layer_num)
    return pool, f"stand-in: {why}"


class _StandinPool:
    """Methods copied onto a subclass of the era's MHATokenToKVPool (see build_kv_pool)."""

    def setup(self, size, page_size, dtype, head_dim, layer_num):
        self.size = size
        self.page_size = page_size
        self.dtype = dtype
        self.store_dtype = dtype
        self.head_num = 1
        self.head_dim = head_dim
        self.v_head_dim = head_dim
        self.layer_num = layer_num
        self.start_layer = 0
        self.end_layer = layer_num - 1
        self.device = "cuda"
        self.layer_transfer_counter = None
        self.layer_shard_enabled = False
        self.layer_shard_size = 1
        self.mem_usage = 0
        rows = size + page_size  # the padded page 0 absorbs dummy writes, as SGLang's pool's
        self.k_buffer = [torch.zeros((rows, 1, head_dim), dtype=dtype, device="cuda")
                         for _ in range(layer_num)]
        self.v_buffer = [torch.zeros((rows, 1, head_dim), dtype=dtype, device="cuda")
                         for _ in range(layer_num)]
        self.k_data_ptrs = torch.tensor([x.data_ptr() for x in self.k_buffer], dtype=torch.uint64,
                                        device="cuda")
        self.v_data_ptrs = torch.tensor([x.data_ptr() for x in self.v_buffer], dtype=torch.uint64,
                                        device="cuda")
        self.data_ptrs = torch.cat([self.k_data_ptrs, self.v_data_ptrs])
        row_bytes = head_dim * torch.empty((), dtype=dtype).element_size()
        self.data_strides = torch.tensor([row_bytes] * (2 * layer_num), device="cuda")
        self.row_dim = head_dim
        self.v_row_dim = head_dim

    def register_layer_transfer_counter(self, layer_transfer_counter):
        self.layer_transfer_counter = layer_transfer_counter

    def _owned_local_layer_range(self):
        return 0, self.layer_num

    def get_key_buffer(self, layer_id):
        if self.layer_transfer_counter is not None:
            self.layer_transfer_counter.wait_until(layer_id - self.start_layer)
        return self.k_buffer[layer_id - self.start_layer]

    def get_value_buffer(self, layer_id):
        if self.layer_transfer_counter is not None:
            self.layer_transfer_counter.wait_until(layer_id - self.start_layer)
        return self.v_buffer[layer_id - self.start_layer]

    def get_kv_buffer(self, layer_id):
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

    def get_kv_size_bytes(self):
        return sum(t.numel() * t.element_size() for t in self.k_buffer + self.v_buffer)

    def get_contiguous_buf_infos(self):
        bufs = self.k_buffer + self.v_buffer
        return ([t.data_ptr() for t in bufs], [t.numel() * t.element_size() for t in bufs],
                [t[0].numel() * t.element_size() for t in bufs])
