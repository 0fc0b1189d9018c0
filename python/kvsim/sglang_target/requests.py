"""Request objects for SGLang's cache API: a minimal stand-in for SGLang's scheduler `Req` with the
attributes the cache reads at each era, and a ReqToTokenPool (the per-request row of device slot
indices SGLang's cache reads and writes).

Attributes SGLang's mem_cache reads (April and August 2026): origin_input_ids, output_ids,
fill_ids (April) / get_fill_ids() (August), req_pool_idx, extra_key, last_node,
last_host_node, best_match_node, host_hit_length, prefix_indices, cache_protected_len,
priority, kv_committed_len / kv_allocated_len, pop_committed_kv_cache() (April), rid."""

from array import array

import torch


class ReqToTokenPool:
    """Rows of device slot indices, one per running request (SGLang's `req_to_token`)."""

    def __init__(self, size, max_context_len, device="cuda"):
        self.size = int(size)
        self.max_context_len = int(max_context_len)
        self.device = device
        self.req_to_token = torch.zeros((self.size, self.max_context_len), dtype=torch.int32,
                                        device=device)
        self.free_slots = list(range(self.size))

    def available_size(self):
        return len(self.free_slots)

    def alloc_row(self):
        if not self.free_slots:
            raise RuntimeError(f"ReqToTokenPool: all {self.size} request rows are in use")
        return self.free_slots.pop(0)

    def free_row(self, idx):
        if idx in self.free_slots or not 0 <= idx < self.size:
            raise RuntimeError(f"ReqToTokenPool: row {idx} freed twice or out of range")
        self.free_slots.append(idx)
        self.free_slots.sort()

    def free(self, req):
        self.free_row(req.req_pool_idx)
        req.req_pool_idx = None

    def write(self, indices, values):
        self.req_to_token[indices] = values


class Req:
    """What SGLang's cache reads of a scheduler request. `token_type` is the token container the
    era's RadixKey compares (array('q') from August 2026, list before)."""

    def __init__(self, rid, tokens, ns, token_type=list, extra_key=None):
        self.rid = str(rid)
        self.ns = int(ns)
        self._token_type = token_type
        self.origin_input_ids = self._tokens(tokens)
        self.output_ids = self._tokens([])
        self.extra_key = extra_key
        self.priority = 0
        self.req_pool_idx = None
        self.last_node = None
        self.last_host_node = None
        self.best_match_node = None
        self.host_hit_length = 0
        self.prefix_indices = None
        self.cache_protected_len = 0
        self.kv_committed_len = 0
        self.kv_allocated_len = 0
        self.kv_committed_freed = False
        self.kv_overallocated_freed = False
        self.is_chunked = 0
        self.is_retracted = False
        self.load_consumer = None  # producer index of the load-back this request's forward waits on
        self.computed = 0

    def _tokens(self, tokens):
        if self._token_type is array:
            return array("q", tokens)
        return list(tokens)

    # -- tokens ---------------------------------------------------------------------------------
    @property
    def all_tokens(self):
        return self.origin_input_ids + self.output_ids

    def set_tokens(self, tokens):
        """All tokens so far (prompt, then outputs): outputs are what goes past the prompt."""
        n = len(self.origin_input_ids)
        if len(tokens) < n or list(tokens[:n]) != list(self.origin_input_ids):
            raise ValueError(f"request {self.rid}: tokens do not extend its prompt")
        self.output_ids = self._tokens(tokens[n:])

    @property
    def fill_ids(self):  # April 2026: an attribute, the tokens this round computes up to
        return self.all_tokens[: self.computed]

    def get_fill_ids(self):  # August 2026
        return self.all_tokens[: self.computed]

    # -- April 2026 commit bookkeeping ----------------------------------------------------------
    def pop_committed_kv_cache(self):
        assert not self.kv_committed_freed, f"Committed KV cache already freed ({self.kv_committed_len=})"
        self.kv_committed_freed = True
        return self.kv_committed_len

    def pop_overallocated_kv_cache(self):
        assert not self.kv_overallocated_freed
        self.kv_overallocated_freed = True
        return self.kv_committed_len, self.kv_allocated_len

    def effective_kv_committed_len(self):
        return self.kv_committed_len

    def finished(self):
        return False

    def __repr__(self):
        return f"<kvsim Req {self.rid} computed={self.computed} protected={self.cache_protected_len}>"
