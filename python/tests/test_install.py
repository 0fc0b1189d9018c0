"""The documented install: `cmake --install <build> --component python` (here into DESTDIR)
gives an importable kvsim whose entry point SGLang's plugin loader finds."""

import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("KVSIM_BUILD_DIR")


@pytest.mark.skipif(not BUILD, reason="KVSIM_BUILD_DIR not set (ctest sets it)")
def test_cmake_install_component_python(tmp_path):
    env = dict(os.environ, DESTDIR=str(tmp_path))
    subprocess.run(["cmake", "--install", BUILD, "--component", "python"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    sites = [os.path.join(root) for root, dirs, _ in os.walk(tmp_path) if "kvsim" in dirs]
    assert len(sites) == 1, sites
    site = sites[0]
    assert any(d.startswith("kvsim-") and d.endswith(".dist-info") for d in os.listdir(site))
    code = (
        "import kvsim, kvsim.sglang, importlib.metadata as md;"
        "assert kvsim.__file__.startswith(%r);"
        "eps=[e for e in md.entry_points(group='sglang.srt.plugins') if e.name=='kvsim'];"
        "assert len(eps)==1, eps; print(eps[0].value)" % site
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = site
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True,
                         cwd=str(tmp_path))
    assert out.stdout.strip() == "kvsim.sglang_plugin:register"
