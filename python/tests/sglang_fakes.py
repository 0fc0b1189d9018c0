"""Fakes of the SGLang objects the adapter is handed: a slot allocator, a req_to_token pool and
a request (kvsim tests only)."""

import numpy as np


class FakeAllocator:
    """A free-list slot allocator with SGLang's free_segment; detects double frees and leaks."""

    device = "cpu"

    def __init__(self, size):
        self.size = size
        self.free_slots = list(range(size - 1, 0, -1))  # slot 0 is padding, as in SGLang
        self.in_use = set()
        self.freed_calls = 0

    def available_size(self):
        return len(self.free_slots)

    def alloc(self, n):
        if n > len(self.free_slots):
            return None
        out = [self.free_slots.pop() for _ in range(n)]
        self.in_use.update(out)
        return np.array(out, dtype=np.int64)

    def free_segment(self, indices, start_pos=0):
        self.freed_calls += 1
        for s in np.asarray(indices).tolist():
            assert s in self.in_use, f"slot {s} freed but not in use"
            self.in_use.remove(s)
            self.free_slots.append(s)

    def free_segments(self, segments):
        for indices, start in segments:
            self.free_segment(indices, start)


class FakeReqToTokenPool:
    def __init__(self, rows, cols):
        self.req_to_token = np.zeros((rows, cols), dtype=np.int64)

    def write(self, where, values):
        row, cols = where
        self.req_to_token[row, cols] = np.asarray(values)


class FakeReq:
    def __init__(self, idx, input_ids, extra_key=None):
        self.req_pool_idx = idx
        self.origin_input_ids = list(input_ids)
        self.output_ids = []
        self.extra_key = extra_key
        self.cache_protected_len = 0
        self.prefix_indices = None
        self.last_node = None

    def get_fill_ids(self):
        return self.origin_input_ids + self.output_ids
