"""The SGLang oracle's op stream driven from Python through kvsim.sglang: per request, the same
hits as SGLang's own RadixCache (tests/data/sglang-oracle/, P=512, 10^6 slots)."""

import os

import pytest
from sglang.srt.mem_cache import base_prefix_cache as bpc
from sglang.srt.mem_cache.radix_cache import RadixKey

from kvsim import oracle_replay as orc
from kvsim.sglang import KvsimRadixCache

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(ROOT, "traces", "public", "mooncake_synthetic_trace.jsonl")
ORACLE = os.path.join(ROOT, "tests", "data", "sglang-oracle", "syn_P512_C1e6.csv")


def run(page_size, capacity, limit=None):
    reqs = orc.read_mooncake(TRACE, limit)
    alloc = orc.SlotAllocator(capacity)
    cache = KvsimRadixCache.create_simulated(mock_allocator=alloc, page_size=page_size)
    rows = []
    res = orc.replay(cache, bpc, RadixKey, reqs, page_size, alloc, orc.OracleTokens(reqs), rows=rows)
    return cache, alloc, res, rows


def test_same_hits_as_sglang_per_request():
    cache, alloc, res, rows = run(512, 10**6)
    oracle = orc.read_rows(ORACLE)
    assert len(rows) == len(oracle) == 3993
    hit_diff, _, _ = orc.diff_rows(rows, oracle)
    assert hit_diff == 0
    assert sum(r[2] for r in rows) == sum(r[2] for r in oracle) == 8_985_600
    # the replay leaves the cache consistent: nothing locked, every used slot in the tree
    assert cache.protected_size() == 0
    assert cache.total_size() == cache.evictable_size() == alloc.used()
    assert cache.sanity_check() == []


def test_bad_trace_line_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input_length": 10, "hash_ids": [1]}\n{"input_length": "x"}\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl:2: bad Mooncake request"):
        orc.read_mooncake(str(bad))
