"""Stand-in for SGLang's KV event types (kvsim's tests only; SGLang's are msgspec structs)."""

import dataclasses
import enum
from typing import List, Optional


class StorageMedium(str, enum.Enum):
    GPU = "GPU"
    CPU = "CPU_PINNED"


@dataclasses.dataclass
class BlockStored:
    block_hashes: List[int]
    parent_block_hash: Optional[int]
    token_ids: List[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str] = None


@dataclasses.dataclass
class BlockRemoved:
    block_hashes: List[int]
    medium: Optional[str] = None


@dataclasses.dataclass
class AllBlocksCleared:
    pass
