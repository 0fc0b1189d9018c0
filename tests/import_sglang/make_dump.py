#!/usr/bin/python3
"""Writes a synthetic SGLang crash dump (stand-in classes under SGLang's names) for the
end-to-end test and the import benchmark.

  make_dump.py OUT.pkl e2e         12 requests, one at a time, HiCache on, page 4: SGLang's
                                    reported cached_tokens are what a prefix cache must hit,
                                    except request 7's, reported as 0 (a flushed cache)
  make_dump.py OUT.pkl bench N [S F]  N requests: 8 shared S-token system prompts (1024), F
                                    fresh tokens (256) and 128 outputs each, cache report by tier
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sglang_standins import GenerateReqInput, ServerArgs, dump_doc, finished_out, write_dump  # noqa


def e2e(out):
    sa = ServerArgs(page_size=4, max_total_tokens=8192, enable_hierarchical_cache=True,
                    chunked_prefill_size=256, max_running_requests=4, enable_cache_report=True)
    system = list(range(5000, 5064))
    reqs = []
    for i in range(12):
        ids = system + [100 + i] * 10
        cached = 0 if i == 0 or i == 7 else 64
        details = {"device": cached, "host": 0} if cached else None
        o = finished_out(len(ids), 3, cached, details)
        reqs.append((GenerateReqInput(input_ids=ids, rid="req-%02d" % i), o, 1000.0 + i, 0.0))
    # one request the crash caught mid-decode, and one still waiting
    reqs.append((GenerateReqInput(input_ids=system + [999], rid="live"),
                 {"text": "pa", "output_ids": [1, 2]}, 1012.0, 0.0))
    reqs.append((GenerateReqInput(input_ids=[7] * 9, rid="queued"), {}, 1012.5, 0.0))
    write_dump(out, dump_doc(reqs, sa))


def bench(out, n, system_tokens=1024, fresh_tokens=256):
    rng = random.Random(7)
    systems = [[rng.randrange(1, 150000) for _ in range(system_tokens)] for _ in range(8)]
    sa = ServerArgs(page_size=16, max_total_tokens=1 << 20, enable_hierarchical_cache=True,
                    chunked_prefill_size=8192, max_running_requests=128)
    reqs = []
    for i in range(n):
        ids = systems[i % 8] + [rng.randrange(1, 150000) for _ in range(fresh_tokens)]
        o = finished_out(len(ids), 128, system_tokens, {"device": system_tokens, "host": 0})
        reqs.append((GenerateReqInput(input_ids=ids, rid="r%d" % i,
                                      sampling_params={"max_new_tokens": 128}),
                     o, 1000.0 + i * 0.05, 1001.0 + i * 0.05))
    write_dump(out, dump_doc(reqs, sa))


if __name__ == "__main__":
    if sys.argv[2] == "e2e":
        e2e(sys.argv[1])
    else:
        bench(sys.argv[1], *map(int, sys.argv[3:6]))
