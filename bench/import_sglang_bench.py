#!/usr/bin/python3
"""Benchmark of kvsim import-sglang: a synthetic SGLang dump of N requests (default 10^4: one
of 8 shared 1024-token system prompts + 256 fresh tokens, 128 outputs, cache report by tier) is
imported in a child process; prints its wall time and peak resident memory.
Target (issue #18): 10^4 requests in <= 5 s and <= 500 MB.

  bench/import_sglang_bench.py [KVSIM_BINARY] [--requests N]
Without a kvsim binary the importer script runs directly under /usr/bin/python3.
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kvsim", nargs="?")
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--system-tokens", type=int, default=1024, help="shared prefix per request")
    p.add_argument("--fresh-tokens", type=int, default=256, help="unique tokens per request")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        dump = os.path.join(d, "crash_dump.pkl")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "import_sglang",
                                                     "make_dump.py"), dump, "bench",
                        str(a.requests), str(a.system_tokens), str(a.fresh_tokens)], check=True, env={**os.environ,
                                                          "PYTHONDONTWRITEBYTECODE": "1"})
        out = os.path.join(d, "w.jsonl")
        cmd = ([a.kvsim, "import-sglang"] if a.kvsim else
               ["/usr/bin/python3", os.path.join(ROOT, "python", "kvsim",
                                                 "import_sglang.py")])
        # A fresh measuring process runs the import as its only child, so the peak resident
        # memory is the import's own (not the dump generator's).
        measure = ("import resource, subprocess, sys, time\n"
                   "t = time.monotonic()\n"
                   "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                   "w = time.monotonic() - t\n"
                   "if r.returncode: sys.exit('import failed: ' + r.stderr)\n"
                   "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
                   "print(w, u.ru_utime + u.ru_stime, u.ru_maxrss)\n")
        r = subprocess.run([sys.executable, "-c", measure] + cmd + [dump, "-o", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr)
        wall, cpu, peak_kb = r.stdout.split()
        wall, cpu, peak_mb = float(wall), float(cpu), int(peak_kb) / 1024.0
        print("import-sglang: %d requests of %d prompt tokens, dump %.1f MB -> trace %.1f MB: "
              "%.2f s wall, %.2f s CPU, peak RSS %.0f MB (targets: <= 5 s, <= 500 MB)" %
              (a.requests, a.system_tokens + a.fresh_tokens, os.path.getsize(dump) / 1e6,
               os.path.getsize(out) / 1e6, wall, cpu, peak_mb))


if __name__ == "__main__":
    main()
