"""Modules written by kvsim that stand in for the parts of SGLang a cache does not need.

Each file here is executed afresh into the module object of the SGLang name it serves (one
load, one set of stand-ins), with `_kvsim_load` (the loader's LoadContext) in its namespace.
Names a stand-in does not define resolve to inert dummies (kvsim.sglang_target.dummy)."""

# SGLang (or third-party) module name -> stand-in file in this folder.
STANDINS = {
    "sglang.srt.utils": "utils",
    "sglang.srt.utils.common": "utils",
    "sglang.srt.platforms": "platforms",
    "sglang.srt.environ": "environ",
    "sglang.srt.runtime_context": "runtime_context",
    "sglang.srt.distributed": "distributed",
    "sglang.srt.distributed.parallel_state": "distributed",
    "sglang.srt.distributed.communication_tags": "communication_tags",
    "sglang.srt.layers.dp_attention": "dp_attention",
    "sglang.srt.observability.metrics_collector": "metrics",
    "sglang.srt.metrics.collector": "metrics",
    "sglang.srt.disaggregation.kv_events": "kv_events",
    "sglang.srt.mem_cache.storage.mmap": "mmap_alloc",
    "sglang.srt.mem_cache.storage.mmap.mmap_allocator": "mmap_alloc",
    "sglang.srt.layers.quantization.fp8_kernel": "fp8",
    "sglang.kernels.ops.quantization.fp8_kernel": "fp8",
    "triton": "triton",
    "triton.language": "triton_language",
    "msgspec": "msgspec",
    "sglang.srt.session.streaming_session": "streaming_session",  # UnifiedRadixCache (hybrid.py)
    "sglang.srt.utils.torch_memory_saver_adapter": "torch_memory_saver_adapter",  # MambaPool (mamba.py)
    "sglang.srt.layers.attention.fla.chunk_delta_h": "fla_chunk",  # MambaRadixCache (mamba.py)
    "sglang.kernels.ops.attention.fla.chunk_delta_h": "fla_chunk",  # the same, August 2026 on
    "sglang.srt.arg_groups.overrides": "arg_overrides",  # ServerArgs.mamba_cache_chunk_size (mamba.py)
    "sglang.srt.hardware_backend.npu.dsv4.dsv4_common_hooks": "npu_dsv4_hooks",  # SWA release (hybrid.py)
}

# Third-party packages SGLang imports that a CPU-only kvsim never has (or must not use): any
# module under them that is not a stand-in above is an inert dummy.
DUMMY_TOPLEVEL = ("triton", "sgl_kernel", "sgl_kernel_npu", "torch_npu", "flashinfer", "deep_gemm",
                  "aiter", "mooncake", "nixl", "vllm")

# Pure-Python libraries SGLang imports: the real one when it is installed, else the stand-in
# above or an inert dummy.
SOFT_TOPLEVEL = ("msgspec", "zmq", "pydantic", "orjson", "pybase64", "transformers", "einops",
                 "tqdm", "setproctitle", "huggingface_hub", "prometheus_client", "uvloop", "aiohttp",
                 "fastapi")
