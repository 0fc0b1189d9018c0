"""The driver's fork server (`--serve-forks`): SGLang loaded once, one forked driver per run over
two FIFOs. A forked driver must answer exactly as a fresh driver process does, run after run —
the simulator's replays run in fresh processes, its hunts in forked ones."""

import json
import os
import subprocess
import sys
import tempfile

from sglang_src import cache_dir, sglang_checkout
from test_driver import BOOT, NEWEST, SCENARIO, SEQUENCE


def _env():
    here = os.path.dirname(os.path.abspath(__file__))
    return here, dict(os.environ, PYTHONPATH=os.path.dirname(here), KVSIM_SGLANG_CACHE=cache_dir(),
                      PYTHONHASHSEED="0")


def _lines():
    return [{"call": "hello", "protocol": 1, "scenario": SCENARIO, "seed": 7}] + SEQUENCE


def _fresh_replies():
    here, env = _env()
    lines = _lines() + [{"call": "bye"}]
    proc = subprocess.run([sys.executable, "-c", BOOT.format(tests=here), "--sglang-src", f"bundle:{NEWEST}"],
                          input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(x) for x in proc.stdout.splitlines()]


def _forked_replies(server, folder, n):
    fifo_in, fifo_out = os.path.join(folder, f"in{n}"), os.path.join(folder, f"out{n}")
    os.mkfifo(fifo_in)
    os.mkfifo(fifo_out)
    server.stdin.write(json.dumps({"fork": {"in": fifo_in, "out": fifo_out}}) + "\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    assert answer["ok"] and answer["pid"] > 0, answer
    replies = []
    with open(fifo_in, "w", encoding="utf-8") as to_child, open(fifo_out, "r", encoding="utf-8") as from_child:
        for line in _lines():
            to_child.write(json.dumps(line) + "\n")
            to_child.flush()
            replies.append(json.loads(from_child.readline()))
        to_child.write(json.dumps({"call": "bye"}) + "\n")
    return replies


def _without_root(replies):
    # The hello names the source's root, the same folder for both; nothing else may differ.
    return [{k: v for k, v in r.items() if k != "sglang"} if i == 0 else r for i, r in enumerate(replies)]


def test_forked_drivers_answer_as_a_fresh_driver_does():
    sglang_checkout(NEWEST)
    fresh = _fresh_replies()
    assert all(r["ok"] and "violation" not in r for r in fresh), fresh
    here, env = _env()
    server = subprocess.Popen([sys.executable, "-c", BOOT.format(tests=here), "--sglang-src", f"bundle:{NEWEST}",
                               "--serve-forks"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        greeting = json.loads(server.stdout.readline())
        assert greeting["ok"] and len(greeting["sglang"]["commit"]) == 40, greeting
        with tempfile.TemporaryDirectory() as folder:
            first = _forked_replies(server, folder, 1)
            second = _forked_replies(server, folder, 2)  # the server's state did not move
        assert _without_root(first) == _without_root(fresh)
        assert second == first
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert server.returncode == 0


def test_a_bad_fork_request_is_refused_and_the_server_goes_on():
    sglang_checkout(NEWEST)
    here, env = _env()
    server = subprocess.Popen([sys.executable, "-c", BOOT.format(tests=here), "--sglang-src", f"bundle:{NEWEST}",
                               "--serve-forks"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert json.loads(server.stdout.readline())["ok"]
        server.stdin.write('{"fork": 3}\n')
        server.stdin.flush()
        refused = json.loads(server.stdout.readline())
        assert refused["ok"] is False and "bad fork request" in refused["error"]
        with tempfile.TemporaryDirectory() as folder:
            assert _forked_replies(server, folder, 1)[0]["ok"]
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def test_a_child_still_running_when_the_server_ends_is_stopped():
    # A hunt worker killed for a hang leaves its forked driver mid-call or, killed between the
    # fork request and opening the FIFOs, blocked in open() for good: the server's end must not
    # leave such a child behind (it was seen orphaned, holding ~150 MB). Here no one opens the
    # child's FIFOs; the server's input closes; the child must be gone with the server.
    sglang_checkout(NEWEST)
    here, env = _env()
    server = subprocess.Popen([sys.executable, "-c", BOOT.format(tests=here), "--sglang-src", f"bundle:{NEWEST}",
                               "--serve-forks"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    with tempfile.TemporaryDirectory() as folder:
        try:
            assert json.loads(server.stdout.readline())["ok"]
            fifo_in, fifo_out = os.path.join(folder, "in"), os.path.join(folder, "out")
            os.mkfifo(fifo_in)
            os.mkfifo(fifo_out)
            server.stdin.write(json.dumps({"fork": {"in": fifo_in, "out": fifo_out}}) + "\n")
            server.stdin.flush()
            pid = json.loads(server.stdout.readline())["pid"]
            os.kill(pid, 0)  # alive, blocked opening its input
        finally:
            server.stdin.close()
            server.wait(timeout=60)
        assert server.returncode == 0
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                alive = stat.read()
        except (ProcessLookupError, FileNotFoundError):
            alive = ""
        assert alive == "", f"the forked driver outlived its server: {alive}"
