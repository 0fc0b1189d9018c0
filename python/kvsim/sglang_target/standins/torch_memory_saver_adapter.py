"""sglang.srt.utils.torch_memory_saver_adapter: SGLang's pools (ReqToTokenPool, MambaPool) open
`TorchMemorySaverAdapter.create(enable=...).region(tag)` around their allocations. kvsim's fake
device has no memory saver: create refuses enable=True, and the region is a plain context."""

from contextlib import nullcontext


class TorchMemorySaverAdapter:
    @staticmethod
    def create(enable=False):
        if enable:
            raise RuntimeError("kvsim stand-in: the torch memory saver is not emulated (enable=False only)")
        return _NoopAdapter()


class _NoopAdapter:
    enabled = False

    def region(self, *_args, **_kwargs):
        return nullcontext()

    def pause(self, *_args, **_kwargs):
        pass

    def resume(self, *_args, **_kwargs):
        pass
