"""kvsim.sglang_target.source: an SGLang tree from a bundle tag, a checkout path, an installed
package; clear errors for anything else."""

import os
import re
import subprocess
import sys
import threading

import pytest
from sglang_src import bundle_or_skip, cache_dir, sglang_checkout, target

TAG = "sglang-27659ea8c8"
MARKER = os.path.join("sglang", "srt", "mem_cache", "radix_cache.py")


def test_bundle_tag_resolves_to_an_extracted_tree_with_sglangs_full_commit():
    src = sglang_checkout(TAG)
    assert src.kind == "bundle" and src.tag == TAG
    assert os.path.isfile(os.path.join(src.python_dir, MARKER))
    # The slice commit's message names SGLang's own commit; the tag is its first 10 hex.
    assert re.fullmatch(r"[0-9a-f]{40}", src.commit) and src.commit.startswith(TAG[len("sglang-"):])
    assert TAG in src.describe() and src.commit in src.describe()


def test_bundle_prefix_bare_tag_and_short_form_name_the_same_tree():
    a = target.resolve_source(TAG, cache_dir=cache_dir()) if bundle_or_skip() else None
    b = target.resolve_source(f"bundle:{TAG}", cache_dir=cache_dir())
    c = target.resolve_source("bundle:27659ea8c8", cache_dir=cache_dir())
    assert a.python_dir == b.python_dir == c.python_dir


def test_checkout_python_dir_and_package_dir_resolve_to_one_tree():
    src = sglang_checkout(TAG)
    for given in (src.root, src.python_dir, src.package_dir):
        got = target.resolve_source(given)
        assert got.kind == "checkout" and got.python_dir == src.python_dir
        assert got.commit == src.commit  # the extraction's commit stamp


def test_git_checkout_commit_is_rev_parse_head(tmp_path):
    src = sglang_checkout(TAG)
    repo = tmp_path / "sglang-checkout"
    (repo / "python").mkdir(parents=True)
    os.symlink(src.package_dir, repo / "python" / "sglang")
    git = ["git", "-c", "user.name=kvsim", "-c", "user.email=kvsim@example.invalid"]
    subprocess.run(git + ["init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "x"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()
    got = target.resolve_source(str(repo))
    assert got.commit == head and got.python_dir == str(repo / "python")


def installed_tree(tmp_path, src):
    """A site-packages-like folder whose `sglang/__init__.py` must never run."""
    site = tmp_path / "site"
    pkg = site / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the heavy sglang/__init__.py ran')\n")
    os.symlink(os.path.join(src.package_dir, "srt"), pkg / "srt")
    return site


def test_installed_sglang_is_found_without_importing_it(tmp_path, monkeypatch):
    src = sglang_checkout(TAG)
    site = installed_tree(tmp_path, src)
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    got = target.resolve_source("installed")
    assert got.kind == "installed" and got.python_dir == str(site)
    assert "sglang" not in sys.modules


def test_no_installed_sglang_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(target.SglangSourceError, match="no installed `sglang`"):
        target.resolve_source("installed")


def test_path_that_is_not_an_sglang_tree_names_the_path(tmp_path):
    (tmp_path / "python" / "sglang").mkdir(parents=True)
    with pytest.raises(target.SglangSourceError, match=re.escape(str(tmp_path))):
        target.resolve_source(str(tmp_path))
    missing = tmp_path / "nope"
    with pytest.raises(target.SglangSourceError, match="does not exist: " + re.escape(str(missing))):
        target.resolve_source(str(missing))
    with pytest.raises(target.SglangSourceError, match="not 42"):
        target.resolve_source(42)


def test_unknown_tag_is_named_with_the_known_ones(tmp_path):
    bundle_or_skip()
    with pytest.raises(target.SglangSourceError, match=r"unknown SGLang tag 'sglang-0000000000'.*" + TAG):
        target.resolve_source("bundle:sglang-0000000000", cache_dir=str(tmp_path))
    assert os.listdir(tmp_path) == []  # no half-extracted tree left behind


def test_missing_bundle_names_its_path(tmp_path, monkeypatch):
    missing = str(tmp_path / "absent.bundle")
    with pytest.raises(target.SglangSourceError, match="bundle is missing: " + re.escape(missing)):
        target.resolve_source(f"bundle:{TAG}", bundle=missing, cache_dir=str(tmp_path))
    monkeypatch.setenv("KVSIM_SGLANG_BUNDLE", missing)
    assert target.default_bundle_path() == missing
    with pytest.raises(target.SglangSourceError, match=re.escape(missing)):
        target.resolve_source(TAG, cache_dir=str(tmp_path))


def test_concurrent_extractions_of_one_tag_agree_and_leave_no_temp_dirs(tmp_path):
    bundle_or_skip()
    results, errors = [], []

    def extract():
        try:
            results.append(target.resolve_source(f"bundle:{TAG}", cache_dir=str(tmp_path)))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=extract) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.python_dir for r in results}) == 1 and len(results) == 3
    assert sorted(os.listdir(tmp_path)) == [TAG]
    assert os.path.isfile(os.path.join(results[0].python_dir, MARKER))
