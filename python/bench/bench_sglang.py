#!/usr/bin/python3
"""kvsim.sglang vs SGLang's own RadixCache on the oracle op stream, in one process.

Needs SGLang's RadixCache sources and the oracle's stubs (not part of kvsim): run the shared
oracle's setup.sh first (it extracts SGLang's files into /tmp/sglang-oracle/src), then

  PYTHONPATH=build/default/python /usr/bin/python3 python/bench/bench_sglang.py \\
      --oracle-run ../shared/tools/sglang_oracle/run.py --src-dir /tmp/sglang-oracle/src \\
      --page-size 512 --capacity 1e7 --repeat 5

Both caches get the same requests, the same tokens (array('q') keys, as SGLang passes them),
the same allocator and the same loop (kvsim.oracle_replay.replay); only the cache calls are
timed. Runs alternate (SGLang, kvsim, SGLang, ...) and the medians are compared. With kvsim
built on SGLang's real BasePrefixCache types (MatchResult, InsertParams, ... from the extracted
sources), the per-request hits of both are compared too. Also prints the bare cost of one
binding call and of a 16-page match.
"""

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import timeit
from array import array


def load_oracle(run_py, src_dir):
    spec = importlib.util.spec_from_file_location("sglang_oracle_run", run_py)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    mod.install_stubs(src_dir)
    from sglang.srt.mem_cache import base_prefix_cache as bpc
    from sglang.srt.mem_cache import radix_cache as rc

    return bpc, rc


def micro(bpc, rc, KvsimRadixCache):
    import kvsim

    out = {}
    t = kvsim.RadixTree(page_size=16)
    n = 200_000
    out["us_bare_call_evictable_size"] = min(timeit.repeat(t.evictable_size, number=n, repeat=5)) / n * 1e6
    toks = list(range(256))
    t.insert(toks, toks)
    key = array("q", toks)
    n = 20_000
    out["us_core_match_16_pages"] = min(timeit.repeat(lambda: t.match_prefix(key), number=n, repeat=5)) / n * 1e6
    cache = KvsimRadixCache.create_simulated(page_size=16)
    cache.insert(bpc.InsertParams(key=rc.RadixKey(key), value=None))
    p = bpc.MatchPrefixParams(key=rc.RadixKey(key))
    out["us_adapter_match_16_pages"] = min(timeit.repeat(lambda: cache.match_prefix(p), number=n, repeat=5)) / n * 1e6
    sg = rc.RadixCache.create_simulated(page_size=16)
    sg.insert(bpc.InsertParams(key=rc.RadixKey(key), value=None))
    out["us_sglang_match_16_pages"] = min(timeit.repeat(lambda: sg.match_prefix(p), number=n, repeat=5)) / n * 1e6
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle-run", required=True, help="the shared oracle's run.py (stubs)")
    ap.add_argument("--src-dir", default="/tmp/sglang-oracle/src")
    ap.add_argument("--trace", default="traces/public/mooncake_synthetic_trace.jsonl")
    ap.add_argument("--page-size", type=int, default=512)
    ap.add_argument("--capacity", type=float, default=1e7)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    bpc, rc = load_oracle(a.oracle_run, a.src_dir)
    import torch

    from kvsim import oracle_replay as orc
    from kvsim.sglang import KvsimRadixCache

    assert issubclass(KvsimRadixCache, bpc.BasePrefixCache)  # built on SGLang's real types
    reqs = orc.read_mooncake(a.trace)
    cap = None if a.capacity <= 0 else int(a.capacity)
    times = {"sglang": [], "kvsim": []}
    rows = {}
    cache = None
    for rep in range(a.repeat):
        for name in ("sglang", "kvsim"):
            # Each run starts on a collected heap: the last run's cache (SGLang's tree is full of
            # reference cycles) is garbage the next run's allocations would otherwise collect.
            cache = None
            gc.collect()
            alloc = orc.SlotAllocator(cap, tensor=torch)
            cls = rc.RadixCache if name == "sglang" else KvsimRadixCache
            cache = cls.create_simulated(mock_allocator=alloc, page_size=a.page_size)
            r = []
            res = orc.replay(cache, bpc, rc.RadixKey, reqs, a.page_size, alloc, orc.OracleTokens(reqs), tensor=torch,
                             rows=r)
            times[name].append(res["timed_s"])
            rows[name] = r
            print(f"  run {rep} {name}: timed {res['timed_s']:.3f} s, loop {res['loop_s']:.3f} s, "
                  f"hit rate {res['hit_tokens'] / res['input_tokens']:.4f}", file=sys.stderr)
    hit_diff, any_diff, _ = orc.diff_rows(rows["kvsim"], rows["sglang"])
    med = {k: statistics.median(v) for k, v in times.items()}
    ops = res["ops"]
    out = dict(page_size=a.page_size, capacity=cap, repeat=a.repeat, requests=len(reqs),
               sglang_timed_s=med["sglang"], kvsim_timed_s=med["kvsim"],
               sglang_ops_per_s=ops / med["sglang"], kvsim_ops_per_s=ops / med["kvsim"],
               speedup=med["sglang"] / med["kvsim"], differing_hit_requests=hit_diff,
               differing_rows=any_diff, all_sglang_s=times["sglang"], all_kvsim_s=times["kvsim"])
    out.update(micro(bpc, rc, KvsimRadixCache))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
