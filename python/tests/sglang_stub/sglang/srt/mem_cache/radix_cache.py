"""Stand-in for SGLang's RadixKey (kvsim's tests only): tokens, extra_key, optional limit."""

from array import array
from typing import Optional


class RadixKey:
    def __init__(self, token_ids, extra_key: Optional[str] = None, is_bigram: bool = False,
                 limit: Optional[int] = None):
        self.token_ids = token_ids if not isinstance(token_ids, list) else array("q", token_ids)
        self.extra_key = extra_key
        self.is_bigram = is_bigram
        self.limit = limit

    def __len__(self):
        n = len(self.token_ids)
        return min(n, self.limit) if self.limit is not None else n
