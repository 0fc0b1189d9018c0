"""Stand-in for sglang.srt.mem_cache.base_prefix_cache (kvsim's tests only).

Written for kvsim from SGLang's documented contract (field names and defaults as SGLang's
revision in kvsim.sglang.SGLANG_REVISION), not copied: just the types the adapter touches.
"""

import dataclasses
from abc import ABC, abstractmethod
from typing import Any, NamedTuple, Optional


@dataclasses.dataclass
class MatchPrefixParams:
    key: Any
    cow_mamba: bool = False
    req: Any = None


@dataclasses.dataclass
class InsertParams:
    key: Any = None
    value: Any = None
    mamba_value: Any = None
    prev_prefix_len: int = 0
    swa_evicted_seqlen: int = 0
    chunked: bool = False
    priority: int = 0


@dataclasses.dataclass
class InsertResult:
    prefix_len: int
    total_len: int = 0
    last_device_node: Any = None
    mamba_exist: bool = False


@dataclasses.dataclass
class EvictParams:
    num_tokens: int = 0
    swa_num_tokens: int = 0
    mamba_num: int = 0


@dataclasses.dataclass
class EvictResult:
    num_tokens_evicted: int = 0
    swa_num_tokens_evicted: int = 0
    mamba_num_evicted: int = 0


@dataclasses.dataclass
class IncLockRefResult:
    delta: Optional[int] = None


@dataclasses.dataclass
class DecLockRefResult:
    delta: Optional[int] = None


class MatchResult(NamedTuple):
    device_indices: Any
    last_device_node: Any
    last_host_node: Any
    best_match_node: Any
    host_hit_length: int = 0


class BasePrefixCache(ABC):
    @abstractmethod
    def reset(self): ...

    @abstractmethod
    def match_prefix(self, params): ...

    @abstractmethod
    def cache_finished_req(self, req, is_insert=True, **kwargs): ...

    @abstractmethod
    def cache_unfinished_req(self, req, **kwargs): ...

    @abstractmethod
    def evict(self, params): ...

    @abstractmethod
    def inc_lock_ref(self, node): ...

    @abstractmethod
    def dec_lock_ref(self, node, params=None): ...

    def evictable_size(self):
        return 0

    def protected_size(self):
        return 0

    def total_size(self):
        raise NotImplementedError()

    def pretty_print(self):
        raise NotImplementedError()

    def take_events(self):
        return []
