#!/usr/bin/python3
"""Cost of recording: the oracle op stream through kvsim.sglang with recording off and on,
alternating in one process; only the cache calls are timed (kvsim.oracle_replay.replay).

  PYTHONPATH=build/default/python /usr/bin/python3 python/bench/bench_recording.py \\
      --oracle-run ../shared/tools/sglang_oracle/run.py --src-dir /tmp/sglang-oracle/src \\
      --page-size 512 --capacity 1e7 --repeat 5

Needs the shared oracle's extracted SGLang sources (as bench_sglang.py). Each recording goes to
a fresh temporary directory (removed after its size is read); prints the medians, the overhead
and the recording's size. `--check-replay KVSIM` also replays the last recording with
`kvsim replay` and reports whether it matches.
"""

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sglang import load_oracle  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle-run", required=True)
    ap.add_argument("--src-dir", default="/tmp/sglang-oracle/src")
    ap.add_argument("--trace", default="traces/public/mooncake_synthetic_trace.jsonl")
    ap.add_argument("--page-size", type=int, default=512)
    ap.add_argument("--capacity", type=float, default=1e7)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--check-replay", metavar="KVSIM", help="kvsim binary: replay the last recording")
    a = ap.parse_args()
    bpc, rc = load_oracle(a.oracle_run, a.src_dir)
    import torch

    from kvsim import oracle_replay as orc
    from kvsim.sglang import KvsimRadixCache

    reqs = orc.read_mooncake(a.trace)
    cap = None if a.capacity <= 0 else int(a.capacity)
    times = {"off": [], "on": []}
    sizes = {}
    replay = None
    for rep in range(a.repeat):
        # Pairs alternate which mode runs first, so that neither always gets the warmer caches.
        for mode in (("off", "on") if rep % 2 == 0 else ("on", "off")):
            gc.collect()  # each run starts on a collected heap
            d = tempfile.mkdtemp(prefix="kvsim-bench-rec-")
            try:
                alloc = orc.SlotAllocator(cap, tensor=torch)
                cache = KvsimRadixCache.create_simulated(
                    mock_allocator=alloc, page_size=a.page_size, record=d if mode == "on" else None)
                res = orc.replay(cache, bpc, rc.RadixKey, reqs, a.page_size, alloc, orc.OracleTokens(reqs),
                                 tensor=torch)
                path = cache.core.recording_path
                cache.core.close_recording()
                times[mode].append(res["timed_s"])
                if mode == "on":
                    sizes = {os.path.basename(f): os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)}
                    if a.check_replay and rep == a.repeat - 1:
                        out = subprocess.run([a.check_replay, "replay", path, "--json"], capture_output=True,
                                             text=True)
                        replay = json.loads(out.stdout)["matches_recording"] if out.returncode == 0 else out.stderr
                print(f"  run {rep} {mode}: timed {res['timed_s']:.3f} s", file=sys.stderr)
            finally:
                shutil.rmtree(d)
    med = {k: statistics.median(v) for k, v in times.items()}
    out = dict(page_size=a.page_size, capacity=cap, repeat=a.repeat, requests=len(reqs),
               off_timed_s=med["off"], on_timed_s=med["on"], overhead_pct=100 * (med["on"] / med["off"] - 1),
               # The median of each pair's own ratio: less moved by drift over the whole run.
               overhead_pct_paired=100 * (statistics.median(n / f for f, n in zip(times["off"], times["on"])) - 1),
               recording_bytes=sum(sizes.values()), recording_files=sizes,
               all_off_s=times["off"], all_on_s=times["on"])
    if replay is not None:
        out["replay_matches_recording"] = replay
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
