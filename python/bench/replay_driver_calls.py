"""Replays a recorded SGLang-target driver session (the JSON lines a hunt unit sent to
`python -m kvsim.sglang_target.driver`) in-process, writes the replies as the driver's protocol
loop does (one sorted-keys JSON line per call) and prints the seconds the calls took, in all
and in the driver's checks. Two package trees replaying the same session must write identical
replies (same violations, decisions and states): that is how a speed-up is shown not to change
a verdict. Asserts nothing itself.

    KVSIM_SOURCE_DIR=. PYTHONPATH=<package tree> /usr/bin/python3 python/bench/replay_driver_calls.py \
        CALLS.jsonl [--replies OUT.jsonl] [--profile OUT.prof]

A session is recorded by running a hunt with KVSIM_SGLANG_FORK=0 and KVSIM_PYTHON set to a
script that tees its standard input to a file before running /usr/bin/python3 "$@"; its first
line may be "# <the driver's arguments>" (where --sglang-src and --content-every are read from).
"""

import argparse
import json
import sys
import time


def driver_args(first_line):
    p = argparse.ArgumentParser()
    p.add_argument("--sglang-src", required=True)
    p.add_argument("--content-every", type=int, default=None)
    words = first_line.lstrip("#").split()
    a, _ = p.parse_known_args([w for w in words if w not in ("-m", "kvsim.sglang_target.driver")])
    return a


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("calls")
    p.add_argument("--sglang-src", help="overrides the recorded one")
    p.add_argument("--replies")
    p.add_argument("--profile", help="a cProfile of the calls (process time) to this file")
    a = p.parse_args()
    with open(a.calls, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines or not lines[0].startswith("#"):
        raise SystemExit(f"{a.calls}: the first line is not '# <driver arguments>'")
    rec = driver_args(lines[0])
    requests = [json.loads(line) for line in lines[1:]]

    import kvsim.sglang_target.driver as driver_mod  # noqa: PLC0415
    kwargs = {} if rec.content_every is None else {"content_every": rec.content_every}
    d = driver_mod.Driver(a.sglang_src or rec.sglang_src, **kwargs)
    check_s = [0.0]
    plain_check = driver_mod.Driver._check

    def timed_check(self, call):
        t = time.perf_counter()
        try:
            return plain_check(self, call)
        finally:
            check_s[0] += time.perf_counter() - t
    driver_mod.Driver._check = timed_check
    out = open(a.replies, "w", encoding="utf-8") if a.replies else None
    prof = None
    if a.profile:
        import cProfile  # noqa: PLC0415
        prof = cProfile.Profile(time.process_time)
    sys.stdout.flush()
    saved_stdout, sys.stdout = sys.stdout, sys.stderr  # as the driver's main: SGLang prints to stderr
    start = time.perf_counter()
    cpu = time.process_time()
    hello_s = 0.0
    n = 0
    try:
        for i, request in enumerate(requests):
            if prof is not None and i == 1:
                prof.enable()
            t = time.perf_counter()
            reply = d.handle(request)
            if i == 0:
                hello_s = time.perf_counter() - t
                if not reply or not reply.get("ok"):
                    raise SystemExit(f"hello failed: {reply}")
            if reply is None:
                break
            n += 1
            if out is not None:
                out.write(json.dumps(reply, sort_keys=True) + "\n")
    finally:
        if prof is not None:
            prof.disable()
            prof.dump_stats(a.profile)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        sys.stdout = saved_stdout
        if out is not None:
            out.close()
        d.close()
    print(f"{a.calls}: {n} calls, {wall:.2f} s wall ({cpu:.2f} s CPU), hello {hello_s:.2f} s, "
          f"checks {check_s[0]:.2f} s, {(n - 1) / max(wall - hello_s, 1e-9):.0f} calls/s after hello")


if __name__ == "__main__":
    main()
