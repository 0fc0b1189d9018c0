#!/usr/bin/python3
"""KV events of kvsim.sglang vs SGLang's own RadixCache on the same calls (outside CI).

Same setup as run_sglang_unit_tests.py (the shared oracle's extraction and stubs). Drives both
caches with the same random inserts, matches and evictions (page sizes 1, 2, 4; one lock held
at a time so eviction order is forced to agree) and compares the event streams field by field:
BlockStored (block hash, parent hash, tokens, block size), BlockRemoved, AllBlocksCleared.

  PYTHONPATH=build/default/python /usr/bin/python3 python/bench/compare_sglang_events.py \\
      --oracle-run ../shared/tools/sglang_oracle/run.py --src-dir /tmp/sglang-oracle/src
"""

import argparse
import importlib.util
import random
import sys
import unittest.mock
from array import array


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle-run", required=True)
    ap.add_argument("--src-dir", default="/tmp/sglang-oracle/src")
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("sglang_oracle_run", a.oracle_run)
    orun = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = orun
    spec.loader.exec_module(orun)
    orun.install_stubs(a.src_dir)
    import torch
    from sglang.srt.mem_cache import base_prefix_cache as bpc
    from sglang.srt.mem_cache import radix_cache as rc

    from kvsim.sglang import KvsimRadixCache

    def norm(events):
        out = []
        for e in events:
            name = type(e).__name__
            if name == "BlockStored":
                out.append((name, tuple(e.block_hashes), e.parent_block_hash, tuple(e.token_ids), e.block_size))
            elif name == "BlockRemoved":
                out.append((name, tuple(sorted(e.block_hashes))))
            else:
                out.append((name,))
        return out

    total = 0
    for P in (1, 2, 4):
        rng = random.Random(P)
        caches = []
        for cls in (rc.RadixCache, KvsimRadixCache):
            alloc = unittest.mock.Mock()
            alloc.device = torch.device("cpu")
            caches.append(cls.create_simulated(mock_allocator=alloc, page_size=P, enable_kv_cache_events=True))
        for step in range(a.steps):
            toks = [rng.randrange(6) for _ in range(rng.randrange(1, 20))]
            op = rng.random()
            for c in caches:
                if op < 0.6:
                    c.insert(bpc.InsertParams(key=rc.RadixKey(array("q", toks)), value=None))
                elif op < 0.9:
                    c.match_prefix(bpc.MatchPrefixParams(key=rc.RadixKey(array("q", toks))))
                else:
                    c.evict(bpc.EvictParams(num_tokens=10**9))  # everything: order cannot differ
            ev = [norm(c.take_events()) for c in caches]
            if ev[0] != ev[1]:
                print(f"P={P} step {step}: events differ\n  sglang {ev[0]}\n  kvsim  {ev[1]}")
                return 1
            total += len(ev[0])
    print(f"KV events identical: {total} events over {3 * a.steps} calls (page sizes 1, 2, 4)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
