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


@pytest.mark.skipif(not BUILD, reason="KVSIM_BUILD_DIR not set (ctest sets it)")
def test_setup_step_makes_kvsim_importable_in_a_clean_environment(tmp_path):
    """tools/setup.sh's last step (tools/install_python.sh) writes kvsim.pth into the user site:
    afterwards a fresh interpreter with no PYTHONPATH, started outside the repository, imports
    kvsim and kvsim.sglang from this build (the README's `python3 -c "import kvsim,
    kvsim.sglang"`). Before the step the same command fails."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    env = {"PATH": os.path.dirname(python) + ":/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONUSERBASE": str(tmp_path / "userbase")}
    code = "import kvsim, kvsim.sglang; print(kvsim.__file__)"
    before = subprocess.run([python, "-c", code], env=env, cwd=str(tmp_path), capture_output=True, text=True)
    assert before.returncode != 0 and "No module named 'kvsim'" in before.stderr, before
    subprocess.run([os.path.join(repo, "tools", "install_python.sh"), BUILD], check=True, env=env,
                   cwd=str(tmp_path), stdout=subprocess.DEVNULL)
    after = subprocess.run([python, "-c", code], env=env, cwd=str(tmp_path), capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert os.path.realpath(after.stdout.strip()).startswith(os.path.realpath(os.path.join(BUILD, "python")))
