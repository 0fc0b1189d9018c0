"""The SGLang oracle's op stream, driven from Python through any SGLang-style prefix cache.

The stream (tests/data/sglang-oracle/NOTE.md, docs/sglang.md): for each request of a
Mooncake-format trace, in file order, nothing concurrent:

  m = match_prefix(tokens); hit = len(m.device_indices); inc_lock_ref(m.last_device_node)
  need = floor(len(inserted)/P)*P - hit; if fewer slots are free: evict(need - free)
  insert(inserted[:aligned], m.device_indices ++ new slots); free the slots of any part insert
  found already present; dec_lock_ref(m.last_device_node)

Tokens: block b (hash id h) is h*512 + j. Tokens the oracle makes request-unique (the partial
last block, outputs) are numbered from (max_hash + 1) * 512 upwards in file order, so every id
fits kvsim's 32-bit tokens; only equality matters, so SGLang's result is the same on them.

``replay()`` takes the cache class and SGLang's parameter types (real SGLang or kvsim's test
stand-in), so the same loop runs kvsim.sglang.KvsimRadixCache and SGLang's RadixCache.

    PYTHONPATH=build/default/python:python/tests/sglang_stub /usr/bin/python3 -m kvsim.oracle_replay \\
        traces/public/mooncake_synthetic_trace.jsonl --page-size 512 --capacity 1e6 \\
        --compare tests/data/sglang-oracle/syn_P512_C1e6.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from array import array
from typing import List, Optional

import numpy as np

BLOCK = 512
COLUMNS = ["idx", "input_len", "hit_tokens", "new_tokens", "evict_requested", "evicted", "cache_tokens"]


def read_mooncake(path: str, limit: Optional[int] = None) -> List[dict]:
    reqs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                int(r["input_length"])
                list(r["hash_ids"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"kvsim: {path}:{n}: bad Mooncake request ({e})")
            reqs.append(r)
            if limit and len(reqs) >= limit:
                break
    return reqs


class OracleTokens:
    """Per-request token arrays of the oracle stream (int64 numpy, 32-bit safe ids)."""

    def __init__(self, reqs: List[dict], tail: str = "unique", with_output: bool = False):
        max_hash = max((max(r["hash_ids"]) for r in reqs if r["hash_ids"]), default=0)
        self.next_unique = (max_hash + 1) * BLOCK
        self.tail = tail
        self.with_output = with_output
        self._ar = np.arange(BLOCK, dtype=np.int64)

    def _unique(self, n: int) -> np.ndarray:
        out = np.arange(self.next_unique, self.next_unique + n, dtype=np.int64)
        self.next_unique += n
        if self.next_unique >= 2**31:
            raise SystemExit("kvsim: trace too large for 32-bit token ids")
        return out

    def make(self, r: dict):
        L = int(r["input_length"])
        ids = r["hash_ids"]
        nfull = L // BLOCK
        rem = L - nfull * BLOCK
        parts = []
        if nfull:
            parts.append((np.asarray(ids[:nfull], dtype=np.int64)[:, None] * BLOCK + self._ar[None, :]).ravel())
        if rem:
            parts.append(ids[nfull] * BLOCK + self._ar[:rem] if self.tail == "hash" else self._unique(rem))
        inp = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        ins = inp
        if self.with_output and r.get("output_length", 0):
            ins = np.concatenate([inp, self._unique(int(r["output_length"]))])
        return inp, ins


class SlotAllocator:
    """A free-list of KV slots with SGLang's allocator calls (slots 1..capacity)."""

    device = "cpu"

    def __init__(self, capacity: Optional[int], tensor=None):
        self.capacity = capacity
        self.next_fresh = 1
        self.free_chunks: list = []
        self.free_count = 0
        self.tensor = tensor  # torch (tensors out) or None (numpy out)

    def available_size(self) -> int:
        if self.capacity is None:
            return 1 << 62
        return self.capacity - (self.next_fresh - 1) + self.free_count

    def used(self) -> int:
        return self.next_fresh - 1 - self.free_count

    def alloc(self, n: int):
        parts = []
        while n > 0 and self.free_chunks:
            c = self.free_chunks.pop()
            take = c[:n]
            if len(c) > n:
                self.free_chunks.append(c[n:])
            parts.append(take)
            self.free_count -= len(take)
            n -= len(take)
        if n > 0:
            parts.append(np.arange(self.next_fresh, self.next_fresh + n, dtype=np.int64))
            self.next_fresh += n
        if not parts:
            out = np.empty(0, dtype=np.int64)
        else:
            out = np.concatenate(parts) if len(parts) != 1 else parts[0]
        return self.tensor.from_numpy(out) if self.tensor is not None else out

    def free_segment(self, idx, start_pos: int = 0):
        # Kept as given (a view, no copy), as the oracle's own allocator keeps freed tensors: the
        # caches hand over slots they no longer hold, and the driver never writes to them.
        a = idx.numpy() if hasattr(idx, "numpy") else np.asarray(idx)
        if len(a):
            self.free_chunks.append(a)
            self.free_count += len(a)

    def free_segments(self, segs):
        for idx, start in segs:
            self.free_segment(idx, start)

    def free(self, idx, *a, **k):
        self.free_segment(idx)


def replay(cache, bpc, RadixKey, reqs, page_size: int, alloc: SlotAllocator, tokens: OracleTokens,
           tensor=None, rows: Optional[list] = None):
    """Runs the stream through `cache`; returns the timing/total dict; appends CSV rows."""
    perf = time.perf_counter
    MatchPrefixParams, InsertParams, EvictParams = bpc.MatchPrefixParams, bpc.InsertParams, bpc.EvictParams
    P = page_size
    t_calls = 0.0
    totals = dict(requests=0, input_tokens=0, hit_tokens=0, evict_calls=0, inserted_new_tokens=0)
    cat = tensor.cat if tensor is not None else (lambda xs: np.concatenate(xs))
    wall0 = perf()
    for i, r in enumerate(reqs):
        inp, ins = tokens.make(r)
        key_tokens = array("q", inp.tobytes())
        ins_tokens = key_tokens if ins is inp else array("q", ins.tobytes())
        L = len(inp)
        t0 = perf()
        m = cache.match_prefix(MatchPrefixParams(key=RadixKey(key_tokens)))
        node = m.last_device_node
        cache.inc_lock_ref(node)
        t_calls += perf() - t0
        hit = len(m.device_indices)
        ins_len = len(ins_tokens) // P * P
        need = ins_len - hit
        e_req = e_got = 0
        if need > 0 and alloc.available_size() < need:
            e_req = need - alloc.available_size()
            t0 = perf()
            res = cache.evict(EvictParams(num_tokens=e_req))
            t_calls += perf() - t0
            e_got = res.num_tokens_evicted
            totals["evict_calls"] += 1
            if alloc.available_size() < need:  # larger than free + evictable: truncate
                need = alloc.available_size() // P * P
                ins_len = hit + need
        new = alloc.alloc(need)
        value = cat([m.device_indices, new]) if hit else new
        ikey = RadixKey(ins_tokens if ins_len == len(ins_tokens) else ins_tokens[:ins_len])
        t0 = perf()
        ires = cache.insert(InsertParams(key=ikey, value=value))
        cache.dec_lock_ref(node)
        t_calls += perf() - t0
        if ires.prefix_len > hit:
            alloc.free_segment(value[hit : ires.prefix_len])
        totals["requests"] += 1
        totals["input_tokens"] += L
        totals["hit_tokens"] += hit
        totals["inserted_new_tokens"] += ins_len - ires.prefix_len
        if rows is not None:
            rows.append((i, L, hit, ins_len - ires.prefix_len, e_req, e_got, alloc.used()))
    totals["loop_s"] = perf() - wall0
    totals["timed_s"] = t_calls
    totals["ops"] = 2 * totals["requests"] + totals["evict_calls"]
    totals["final_cache_tokens"] = cache.total_size()
    return totals


def read_rows(path: str) -> List[tuple]:
    with open(path) as f:
        rd = csv.reader(f)
        header = next(rd)
        if header != COLUMNS:
            raise SystemExit(f"kvsim: {path}:1: expected columns {','.join(COLUMNS)}")
        return [tuple(int(x) for x in row) for row in rd]


def diff_rows(ours: List[tuple], theirs: List[tuple]):
    """-> (requests whose hit differs, requests with any column differing, first differing)."""
    hit_diff = sum(1 for a, b in zip(ours, theirs) if a[2] != b[2]) + abs(len(ours) - len(theirs))
    any_diff = [a[0] for a, b in zip(ours, theirs) if a != b]
    return hit_diff, len(any_diff) + abs(len(ours) - len(theirs)), any_diff[:5]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--page-size", type=int, default=512)
    ap.add_argument("--capacity", type=float, default=1e7, help="KV slots; <= 0: unlimited")
    ap.add_argument("--tail", choices=["unique", "hash"], default="unique")
    ap.add_argument("--with-output", action="store_true")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--per-request-out")
    ap.add_argument("--compare", help="oracle CSV: report requests that differ (exit 1 if any hit does)")
    ap.add_argument("--record", help="record the calls into this directory (a kvsim call trace)")
    a = ap.parse_args(argv)
    if a.page_size <= 0:
        ap.error("--page-size must be positive")
    from sglang.srt.mem_cache import base_prefix_cache as bpc
    from sglang.srt.mem_cache.radix_cache import RadixKey

    from kvsim.sglang import KvsimRadixCache

    reqs = read_mooncake(a.trace, a.limit or None)
    cap = None if a.capacity <= 0 else int(a.capacity)
    alloc = SlotAllocator(cap)
    cache = KvsimRadixCache.create_simulated(mock_allocator=alloc, page_size=a.page_size, record=a.record)
    rows: list = []
    res = replay(cache, bpc, RadixKey, reqs, a.page_size, alloc, OracleTokens(reqs, a.tail, a.with_output), rows=rows)
    if a.per_request_out:
        with open(a.per_request_out, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            w.writerows(rows)
    if a.record:
        res["recording"] = cache.core.recording_path
        cache.core.close_recording()
    res["token_hit_rate"] = res["hit_tokens"] / max(res["input_tokens"], 1)
    res["ops_per_s"] = res["ops"] / res["timed_s"] if res["timed_s"] else 0.0
    rc = 0
    if a.compare:
        hit_diff, any_diff, first = diff_rows(rows, read_rows(a.compare))
        res.update(differing_hit_requests=hit_diff, differing_rows=any_diff, first_differing=first)
        rc = 1 if hit_diff else 0
    print(json.dumps(res, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
