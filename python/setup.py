"""`pip install ./python`: builds kvsim's Python module with the project's CMake and installs it.

The package metadata (name, version, the numpy dependency, SGLang's plugin entry point) is in
pyproject.toml; this file only says how the extension `kvsim._core` is built: CMake configures
the whole project (the module needs the core, one folder up) with tests, benchmarks and the
command line off, builds the one target `kvsim_python_core` for the interpreter running pip,
and the built `_core*.so` is copied where setuptools expects the extension.

No index is needed (Debian's pip, setuptools and wheel; numpy, pybind11-dev, cmake, ninja and a
C++20 compiler from Debian, as tools/setup.sh installs them):

    pip install --no-build-isolation --no-index ./python

Environment: KVSIM_CMAKE_ARGS (extra configure arguments, e.g. -DKVSIM_CUDA=OFF),
CMAKE_BUILD_PARALLEL_LEVEL (build jobs; default: the CPU count), KVSIM_PIP_BUILD_DIR (the CMake
build folder; default: build/pip-<python version> in the checkout, reused between installs).
ccache is used when it is on PATH.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the CMake project (core/, sim/, python/)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            raise RuntimeError(
                "kvsim: the C++ sources are not next to python/ (%s); install from a checkout: "
                "pip install --no-build-isolation --no-index ./python" % ROOT)
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("kvsim: cmake is not installed (Debian: apt-get install cmake "
                               "ninja-build g++ pybind11-dev python3-dev; or tools/setup.sh)")
        build = os.environ.get("KVSIM_PIP_BUILD_DIR") or os.path.join(
            ROOT, "build", "pip-%d.%d" % sys.version_info[:2])
        # The interpreter running pip (a venv's python is fine: CMake finds its base's headers).
        args = [
            "-S", ROOT, "-B", build,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DKVSIM_TESTS=OFF", "-DKVSIM_BENCH=OFF", "-DKVSIM_TOOLS=OFF", "-DKVSIM_FUZZ=OFF",
            "-DKVSIM_PYTHON=ON",
            "-DPython_EXECUTABLE=" + sys.executable,
        ]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("KVSIM_CMAKE_ARGS", ""))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call([cmake] + args)
        else:
            subprocess.check_call([cmake, build, "-DPython_EXECUTABLE=" + sys.executable])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(
            [cmake, "--build", build, "--target", "kvsim_python_core", "-j", jobs])
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        built = glob.glob(os.path.join(build, "python", "kvsim", "_core" + suffix))
        if not built:
            built = glob.glob(os.path.join(build, "python", "kvsim", "_core*.so"))
        if not built:
            raise RuntimeError("kvsim: the build made no _core module in %s/python/kvsim" % build)
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


# setuptools writes kvsim.egg-info beside setup.py unless told otherwise: keep it in build/.
EGG_BASE = os.path.join(ROOT, "build", "pip-egg-info")
os.makedirs(EGG_BASE, exist_ok=True)

setup(
    options={"egg_info": {"egg_base": os.path.relpath(EGG_BASE, HERE)}},
    packages=find_packages(where=HERE, include=["kvsim", "kvsim.*"]),
    ext_modules=[CMakeExtension("kvsim._core")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
