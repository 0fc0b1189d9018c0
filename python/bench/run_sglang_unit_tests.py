#!/usr/bin/python3
"""SGLang's own TestRadixCache cases against kvsim.sglang (outside CI).

Loads SGLang's test/registered/unit/mem_cache/test_radix_cache_unit.py (extracted, with the
stubs of the shared oracle's run.py, by its setup.sh into --src-dir), rebinds the test
module's global ``RadixCache`` to kvsim.sglang.KvsimRadixCache (every case builds its cache
through RadixCache.create_simulated), and runs the TestRadixCache class. Prints the result of
each case; docs/sglang.md records the outcome and why each failing case fails.

  PYTHONPATH=build/default/python /usr/bin/python3 python/bench/run_sglang_unit_tests.py \\
      --oracle-run ../shared/tools/sglang_oracle/run.py --src-dir /tmp/sglang-oracle/src
"""

import argparse
import importlib.util
import os
import sys
import unittest

TEST_FILE = "test/registered/unit/mem_cache/test_radix_cache_unit.py"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle-run", required=True)
    ap.add_argument("--src-dir", default="/tmp/sglang-oracle/src")
    ap.add_argument("--class", dest="cls", default="TestRadixCache")
    ap.add_argument("--original", action="store_true", help="run against SGLang's RadixCache instead")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("sglang_oracle_run", a.oracle_run)
    orun = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = orun
    spec.loader.exec_module(orun)
    orun.install_stubs(a.src_dir)
    from sglang.srt.mem_cache import radix_cache as rc

    # the same extra stubs as the oracle's --selftest (CI registration, device helper)
    orun._pkg("sglang.test")
    orun._pkg("sglang.test.ci")
    orun._mod("sglang.test.ci.ci_register", register_amd_ci=lambda *x, **k: None,
              register_cuda_ci=lambda *x, **k: None)
    orun._mod("sglang.srt.mem_cache.mamba_radix_cache", TreeNode=rc.TreeNode)
    orun._mod("sglang.srt.utils", get_device=lambda *x, **k: "cpu")
    path = os.path.join(a.src_dir, TEST_FILE)
    tspec = importlib.util.spec_from_file_location("sglang_radix_cache_unit_test", path)
    mod = importlib.util.module_from_spec(tspec)
    sys.modules[tspec.name] = mod
    tspec.loader.exec_module(mod)
    if not a.original:
        from kvsim.sglang import KvsimRadixCache

        mod.RadixCache = KvsimRadixCache  # the swap: every case calls RadixCache.create_simulated
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(getattr(mod, a.cls))
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    bad = res.failures + res.errors
    print(f"{a.cls}: {res.testsRun} run, {res.testsRun - len(bad)} passed, {len(bad)} failed "
          f"({'SGLang RadixCache' if a.original else 'kvsim.sglang'})")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
