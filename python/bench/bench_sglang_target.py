"""Calls per second through the SGLang target's driver (SGLang's own HiRadixCache on kvsim's fake
device), in-process and over the JSON-lines pipe, on a multi-turn sequence with the storage tier
off and on. Prints figures; asserts nothing.

    PYTHONPATH=python /usr/bin/python3 python/bench/bench_sglang_target.py [--tag sglang-6ed5780c4f]
        [--turns 40] [--content-every 16]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests_target")
sys.path.insert(0, TESTS)

import sglang_src  # noqa: E402  (kvsim.sglang_target without kvsim._core)


def scenario(storage):
    cache = {"page_size": 4, "device_tokens": 256, "host_tokens": 512, "layer_count": 2, "item_bytes": 16,
             "host_layout": "page_first", "write_policy": "write_through", "load_back_threshold_tokens": 4}
    if storage:
        cache.update(storage={"backend": "memory"}, prefetch_threshold_tokens=16,
                     prefetch_stop_policy="best_effort")
    return {"cache": cache}


def calls(turns, storage):
    """Sessions that grow by one turn per request (multi-turn); every 8th turn evicts the host
    tier, so with storage the next turn's prefix comes back through a prefetch."""
    out = []
    sessions = 4
    history = {s: list(range(1000 * (s + 1), 1000 * (s + 1) + 24)) for s in range(sessions)}
    for turn in range(turns):
        s = turn % sessions
        prompt = history[s] + [turn % 97, 5, 6, 7]
        rid = f"t{turn}"
        if storage:
            out += [{"call": "arrive", "rid": rid, "ns": 0, "tokens": prompt},
                    {"call": "storage", "worker": 0}, {"call": "poll"}, {"call": "storage", "worker": 1},
                    {"call": "prefetch_check", "rid": rid}]
        out += [{"call": "admit", "rid": rid, "ns": 0, "tokens": prompt},
                {"call": "compute", "rid": rid, "n": len(prompt), "tokens": prompt},
                {"call": "compute", "rid": rid, "n": len(prompt) + 4, "tokens": prompt + [1, 2, 3, 4]},
                {"call": "finish", "rid": rid, "computed": len(prompt) + 4},
                {"call": "step", "stream": 1, "n": 4}, {"call": "poll"}]
        if storage:
            out += [{"call": "storage", "worker": 2}, {"call": "poll"}]
        if turn % 8 == 7:
            out += [{"call": "flush", "storage": storage}, {"call": "evict", "n": 256},
                    {"call": "evict_host", "n": 512}]
        history[s] = prompt + [1, 2, 3, 4]
        if len(history[s]) > 160:
            history[s] = history[s][:24]
    return out + [{"call": "flush", "storage": storage}, {"call": "quiescent"}]


def in_process(tag, seq, storage, content_every):
    from kvsim.sglang_target.driver import Driver  # noqa: PLC0415
    sglang_src.target.unload()
    d = Driver(f"bundle:{tag}", cache_dir=sglang_src.cache_dir(), content_every=content_every)
    try:
        r = d.handle({"call": "hello", "protocol": 1, "scenario": scenario(storage), "seed": 1})
        assert r["ok"], r
        start = time.perf_counter()
        for c in seq:
            r = d.handle(c)
            if not r["ok"] or "violation" in r:
                raise SystemExit(f"{c} -> {r}")
        return len(seq) / (time.perf_counter() - start)
    finally:
        d.close()
        sglang_src.target.unload()


BOOT = ("import sys, runpy; sys.path.insert(0, {tests!r}); import sglang_src; "
        "runpy.run_module('kvsim.sglang_target.driver', run_name='__main__')")


def over_pipe(tag, seq, storage, content_every):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), KVSIM_SGLANG_CACHE=sglang_src.cache_dir())
    proc = subprocess.Popen([sys.executable, "-c", BOOT.format(tests=TESTS), "--sglang-src", f"bundle:{tag}",
                             "--content-every", str(content_every)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)

    def ask(c):
        proc.stdin.write(json.dumps(c) + "\n")
        proc.stdin.flush()
        r = json.loads(proc.stdout.readline())
        if not r["ok"] or "violation" in r:
            raise SystemExit(f"{c} -> {r}")
        return r
    try:
        ask({"call": "hello", "protocol": 1, "scenario": scenario(storage), "seed": 1})
        start = time.perf_counter()
        for c in seq:
            ask(c)
        return len(seq) / (time.perf_counter() - start)
    finally:
        proc.stdin.write(json.dumps({"call": "bye"}) + "\n")
        proc.stdin.close()
        proc.wait(timeout=60)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", default="sglang-6ed5780c4f")
    p.add_argument("--turns", type=int, default=40)
    p.add_argument("--content-every", type=int, default=16)
    a = p.parse_args()
    sglang_src.target.resolve_source(f"bundle:{a.tag}", cache_dir=sglang_src.cache_dir())
    for storage in (False, True):
        seq = calls(a.turns, storage)
        for how, fn in (("in-process", in_process), ("pipe", over_pipe)):
            rate = fn(a.tag, seq, storage, a.content_every)
            print(f"{a.tag} storage={'on ' if storage else 'off'} {how:10s} {len(seq):5d} calls "
                  f"{rate:7.0f} calls/s (content walk every {a.content_every})")


if __name__ == "__main__":
    main()
