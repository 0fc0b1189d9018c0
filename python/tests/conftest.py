"""kvsim's Python tests: the built module comes from PYTHONPATH (ctest sets it to
<build>/python); SGLang is replaced by the stand-in in tests/sglang_stub."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "sglang_stub"))
sys.path.insert(0, _HERE)

import pytest  # noqa: E402


def pytest_configure(config):
    try:
        import kvsim._core  # noqa: F401
    except ImportError as e:  # the module was not built: ctest reads 77 as SKIP
        pytest.exit(f"kvsim module not importable ({e}); build target kvsim_python", returncode=77)
