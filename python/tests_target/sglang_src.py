"""Test helper: SGLang's source at the bundle's tags (../shared/sglang/sglang-slice.bundle),
extracted once into a cache dir, and kvsim.sglang_target importable even where kvsim's C++
module (kvsim._core) is not built.

`sglang_checkout(tag)` -> SglangSource; skips the test when the bundle or git is absent."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import types

import pytest

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_sglang_target():
    """kvsim.sglang_target, without needing kvsim/__init__'s C++ extension."""
    return import_pure_subpackage("kvsim.sglang_target")


def import_pure_subpackage(name):
    """A pure-Python subpackage of kvsim (kvsim.sglang_target, kvsim.fakecuda): when `import
    kvsim` fails for want of kvsim._core, kvsim is registered as a bare package over python/kvsim
    so that the subpackage imports without kvsim/__init__.py."""
    try:
        import kvsim  # noqa: F401
    except ImportError as exc:
        if "_core" not in str(exc):
            raise
        for name in [n for n in sys.modules if n == "kvsim" or n.startswith("kvsim.")]:
            del sys.modules[name]
        pkg = types.ModuleType("kvsim")
        pkg.__path__ = [os.path.join(_PYTHON_DIR, "kvsim")]
        sys.modules["kvsim"] = pkg
    return importlib.import_module(name)


target = import_sglang_target()


def cache_dir() -> str:
    """Where tests extract tags: KVSIM_SGLANG_CACHE, else the build dir, else the user cache."""
    if os.environ.get("KVSIM_SGLANG_CACHE"):
        return os.environ["KVSIM_SGLANG_CACHE"]
    if os.environ.get("KVSIM_BUILD_DIR"):
        return os.path.join(os.environ["KVSIM_BUILD_DIR"], "sglang-src")
    return target.default_cache_dir()


# A zygote (kvsim.sglang_target.zygote) for the tests that run the kvsim binary: started at the
# first such test, stopped at the session's end (conftest.py). Each of those tests used to start
# a driver that imported torch and loaded SGLang (~2 s) for a run of ~0.3 s; the zygote does both
# once per source, and its drivers answer as a spawned driver does (test_zygote.py). Without it
# (KVSIM_TEST_ZYGOTE=0, or where it does not start) the tests spawn their drivers as before.
_ZYGOTE = {}


def _zygote_socket():
    if os.environ.get("KVSIM_TEST_ZYGOTE", "1") == "0":
        return None
    if "socket" in _ZYGOTE:
        return _ZYGOTE["socket"]
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    import time  # noqa: PLC0415
    folder = tempfile.mkdtemp(prefix="kvsim-zygote-")
    path = os.path.join(folder, "socket")
    log = open(os.path.join(folder, "stderr"), "w", encoding="utf-8")  # noqa: SIM115 - kept open
    proc = subprocess.Popen([sys.executable, "-m", "kvsim.sglang_target.zygote", "--socket", path],
                            stdin=subprocess.PIPE, stdout=log, stderr=log,
                            env=dict(os.environ, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0")))
    _ZYGOTE.update(socket=None, proc=proc, folder=folder, log=log)
    deadline = time.monotonic() + 120
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if os.path.exists(path):
        _ZYGOTE["socket"] = path
    return _ZYGOTE["socket"]


def stop_zygote():
    proc = _ZYGOTE.pop("proc", None)
    if proc is not None:
        proc.stdin.close()  # the zygote ends its fork servers, which end their drivers
        try:
            proc.wait(timeout=60)
        except Exception:  # noqa: BLE001
            proc.kill()
            proc.wait()
        _ZYGOTE.pop("log").close()
        shutil.rmtree(_ZYGOTE.pop("folder"), ignore_errors=True)
    _ZYGOTE.clear()


def kvsim_env(**extra):
    """The environment of a test's kvsim process with SGLang's target: the extracted bundle's
    cache, KVSIM_SGLANG_FORK=0 (a driver spawned per run) and, where it runs, the tests' zygote,
    which takes the spawn's place."""
    env = dict(os.environ, KVSIM_SGLANG_CACHE=cache_dir(), KVSIM_SGLANG_FORK="0")
    socket = _zygote_socket()
    if socket is not None:
        env["KVSIM_SGLANG_ZYGOTE"] = socket
    env.update(extra)
    return env


def bundle_or_skip() -> str:
    bundle = target.default_bundle_path()
    if not os.path.isfile(bundle):
        pytest.skip(f"SGLang bundle absent: {bundle}")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return bundle


def bundle_tags() -> list:
    """The bundle's tags for parametrisation; [] when the bundle or git is absent."""
    if not os.path.isfile(target.default_bundle_path()) or shutil.which("git") is None:
        return []
    return list(target.bundle_tags())


def sglang_checkout(tag: str):
    bundle_or_skip()
    return target.resolve_source(f"bundle:{tag}", cache_dir=cache_dir())


# Drivers of the protocol tests (test_hybrid_swa.py, test_mamba_hicache.py): a test module that
# imports `fresh_process_state` gets it as an autouse fixture, which closes every driver `driver`
# made (the fake device uninstalled) and unloads SGLang around each test.
_OPEN = []


@pytest.fixture(autouse=True)
def fresh_process_state():
    target.unload()
    yield
    while _OPEN:
        _OPEN.pop().close()
    target.unload()


def driver(tag):
    from kvsim.sglang_target.driver import Driver
    sglang_checkout(tag)
    d = Driver(f"bundle:{tag}", cache_dir=cache_dir())
    _OPEN.append(d)
    return d


def lifecycle(rid, tokens):
    return [{"call": "admit", "rid": rid, "ns": 0, "tokens": tokens},
            {"call": "compute", "rid": rid, "n": len(tokens), "tokens": tokens},
            {"call": "finish", "rid": rid, "computed": len(tokens)}, {"call": "flush"}]
