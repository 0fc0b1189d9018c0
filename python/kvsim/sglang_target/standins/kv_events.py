"""Stand-in for sglang.srt.disaggregation.kv_events: the KV-cache event records HiCache emits
(kept as plain records with the fields SGLang passes, so a driver can inspect them)."""

import enum

from kvsim.sglang_target.dummy import fallback_getattr


class StorageMedium(str, enum.Enum):
    GPU = "GPU"
    CPU = "CPU"
    CPU_TIER1 = "CPU_TIER1"
    CPU_TIER2 = "CPU_TIER2"
    DISK = "DISK"
    LMCACHE = "LMCACHE"


class KVCacheEvent:
    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "args")
        return f"{type(self).__name__}({fields})"


class BlockStored(KVCacheEvent):
    pass


class BlockRemoved(KVCacheEvent):
    pass


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(KVCacheEvent):
    pass


__getattr__ = fallback_getattr(__name__, globals())
