"""Tests of the SGLang target (docs/sglang-hunt.md): kvsim's fake device, the loader of SGLang's
own cache modules and the driver. They need torch; tests that need SGLang's source use
`sglang_checkout(tag)`, which skips when ../shared/sglang is absent."""

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - exercised only on machines without torch
    if __name__ != "__main__":
        pytest.exit("torch is not installed (apt install python3-torch); SGLang-target tests skipped",
                    returncode=77)


@pytest.fixture(autouse=True, scope="session")
def _zygote_stopped_at_the_end():
    yield
    from sglang_src import stop_zygote
    stop_zygote()
