"""The tests' zygote (kvsim.sglang_target.zygote, KVSIM_SGLANG_ZYGOTE): a replay through it must
print exactly what a replay with a driver spawned for it prints, and kvsim falls back to its own
driver where the zygote is absent or refuses."""

import json
import os
import socket
import subprocess
import sys

import pytest
from sglang_src import kvsim_env, sglang_checkout

NEWEST, FIX001 = "sglang-6ed5780c4f", "sglang-21835fb0af"
_TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triage_traces")


def _exe():
    exe = os.path.join(os.environ.get("KVSIM_BUILD_DIR", ""), "tools", "kvsim")
    if not os.environ.get("KVSIM_BUILD_DIR") or not os.access(exe, os.X_OK):
        pytest.skip("kvsim binary not built (KVSIM_BUILD_DIR/tools/kvsim)")
    return exe


def _replay(trace, tag, env):
    sglang_checkout(tag)
    r = subprocess.run([_exe(), "replay", os.path.join(_TRACES, trace), "--sglang-src", f"bundle:{tag}",
                        "--expect-clean"], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout, r.stderr


def _zygote_or_skip():
    env = kvsim_env()
    if "KVSIM_SGLANG_ZYGOTE" not in env:
        pytest.skip("no zygote (KVSIM_TEST_ZYGOTE=0, or it did not start)")
    return env


@pytest.mark.parametrize("trace,tag", [
    ("hiradix_write_back_host_leaf.trace.jsonl", NEWEST),  # clean
    ("hiradix_write_back_host_leaf.trace.jsonl", FIX001),  # SGLang raises
    ("storage_key_ignores_namespace.newest.trace.jsonl", NEWEST)])  # a content violation
def test_a_replay_through_the_zygote_prints_what_a_spawned_driver_does(trace, tag, tmp_path):
    # The socket named is not there: kvsim spawns its driver, as without a zygote.
    env = _zygote_or_skip()
    through = _replay(trace, tag, env)
    spawned = _replay(trace, tag, dict(env, KVSIM_SGLANG_ZYGOTE=str(tmp_path / "no-socket")))
    assert through == spawned
    assert "event hash" in through[1], through


def _ask(path, request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        return json.loads(s.makefile("r").readline())


def test_the_zygote_refuses_what_its_drivers_could_not_be():
    env = _zygote_or_skip()
    sglang_checkout(NEWEST)
    path = env["KVSIM_SGLANG_ZYGOTE"]
    request = {"python": sys.executable, "src": f"bundle:{NEWEST}", "cwd": os.getcwd(), "greet": True,
               "env": dict(env, PYTHONHASHSEED="0")}
    greeting = _ask(path, request)
    assert greeting["ok"] and greeting["sglang"]["commit"], greeting
    for bad in ({"env": dict(request["env"], PYTHONHASHSEED="1")},
                {"env": dict(request["env"], PYTHONPATH="/nowhere")},
                {"python": "/nowhere/python3"}):
        refused = _ask(path, dict(request, **bad))
        assert not refused["ok"] and refused["error"].startswith("zygote: "), refused
