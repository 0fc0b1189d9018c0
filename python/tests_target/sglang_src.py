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
