"""sglang.srt.hardware_backend.npu.dsv4.dsv4_common_hooks for the SGLang target: SGLang's
DeepSeek-V4 NPU hook that common.free_swa_out_of_window_slots (August 2026, the hybrid target's
SWA release in decode) calls on every SWA eviction. SGLang documents it as a no-op when the
DSV4-NPU state allocators are absent; no allocator kvsim builds has them, so it is a no-op here.
The module's other hooks are left to the loader's dummies (nothing kvsim runs calls them)."""


def maybe_evict_dsv4_state_on_swa(*_args, **_kwargs):
    return None
