"""Where an SGLang source tree comes from: a checkout, an installed `sglang`, or a tag of the
slice bundle (../shared/sglang/sglang-slice.bundle). `resolve_source` returns a SglangSource
naming the `python/` folder the loader imports from and, when it is known, the full commit."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

# The file every usable tree has: the loader cannot do anything without the radix tree.
_MARKER = os.path.join("sglang", "srt", "mem_cache", "radix_cache.py")
_TAG_RE = re.compile(r"^sglang-[0-9a-f]{7,40}$")
_SLICE_MSG_RE = re.compile(r"^sglang ([0-9a-f]{40})\b")
_HEX40_RE = re.compile(r"^[0-9a-f]{40}$")


class SglangSourceError(Exception):
    """The given SGLang source cannot be used (not a tree, unknown tag, missing bundle or git)."""


@dataclasses.dataclass(frozen=True)
class SglangSource:
    root: str  # the tree as given (checkout root, extracted tag, or site-packages dir)
    python_dir: str  # the folder holding the `sglang` package
    commit: Optional[str]  # SGLang's full commit id when known
    tag: Optional[str]  # the bundle tag when it came from the bundle
    kind: str  # "checkout" | "installed" | "bundle"

    @property
    def package_dir(self) -> str:
        return os.path.join(self.python_dir, "sglang")

    def describe(self) -> str:
        what = self.tag or self.root
        commit = self.commit or "unknown commit"
        return f"sglang {what} ({self.kind}, {commit}) at {self.python_dir}"


def _repo_dir() -> str:
    env = os.environ.get("KVSIM_SOURCE_DIR")
    if env:
        return env
    # python/kvsim/sglang_target/source.py -> the checkout root, four levels up.
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def default_bundle_path() -> str:
    env = os.environ.get("KVSIM_SGLANG_BUNDLE")
    if env:
        return env
    return os.path.normpath(os.path.join(_repo_dir(), "..", "shared", "sglang", "sglang-slice.bundle"))


def default_cache_dir() -> str:
    env = os.environ.get("KVSIM_SGLANG_CACHE")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".cache", "kvsim", "sglang")


def _git() -> str:
    git = shutil.which("git")
    if git is None:
        raise SglangSourceError("git is not installed; it is needed to extract SGLang from the bundle")
    return git


def _run_git(args, cwd=None) -> str:
    proc = subprocess.run([_git(), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SglangSourceError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def bundle_tags(bundle: Optional[str] = None) -> dict:
    """{tag: slice commit} of the bundle, read with `git bundle list-heads`."""
    bundle = bundle or default_bundle_path()
    if not os.path.isfile(bundle):
        raise SglangSourceError(f"the SGLang bundle is missing: {bundle} (set KVSIM_SGLANG_BUNDLE)")
    tags = {}
    for line in _run_git(["bundle", "list-heads", bundle]).splitlines():
        sha, _, ref = line.partition(" ")
        if ref.startswith("refs/tags/"):
            tags[ref[len("refs/tags/"):]] = sha
    return dict(sorted(tags.items()))


def _python_dir_of(path: str) -> Optional[str]:
    """The folder holding `sglang/` for a checkout root, its python/ folder, or the package itself."""
    path = os.path.abspath(path)
    cands = [os.path.join(path, "python"), path]
    if os.path.basename(path) == "sglang":
        cands.append(os.path.dirname(path))
    for cand in cands:
        if os.path.isfile(os.path.join(cand, _MARKER)):
            return cand
    return None


def _git_commit_of(path: str) -> Optional[str]:
    if shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True)
    out = proc.stdout.strip()
    if proc.returncode != 0 or not _HEX40_RE.match(out):
        return None
    return out


def _commit_from_stamp(root: str) -> Optional[str]:
    stamp = os.path.join(root, ".kvsim-sglang-commit")
    if os.path.isfile(stamp):
        with open(stamp) as f:
            text = f.read().strip()
        if _HEX40_RE.match(text):
            return text
    return None


def _from_dir(path: str) -> SglangSource:
    if not os.path.exists(path):
        raise SglangSourceError(f"SGLang source path does not exist: {path}")
    python_dir = _python_dir_of(path)
    if python_dir is None:
        raise SglangSourceError(
            f"not an SGLang source tree: {path} (expected python/{_MARKER.replace(os.sep, '/')}, "
            f"or {_MARKER.replace(os.sep, '/')} under it, or a `sglang` package folder)")
    root = os.path.abspath(path)
    commit = (_commit_from_stamp(root) or _commit_from_stamp(os.path.dirname(python_dir))
              or _git_commit_of(python_dir))
    return SglangSource(root=root, python_dir=python_dir, commit=commit, tag=None, kind="checkout")


def _installed() -> SglangSource:
    # find_spec on the top-level name only locates the package; it runs no __init__.
    spec = importlib.machinery.PathFinder.find_spec("sglang", sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise SglangSourceError("no installed `sglang` package was found on sys.path")
    pkg = list(spec.submodule_search_locations)[0]
    python_dir = os.path.dirname(os.path.abspath(pkg))
    if not os.path.isfile(os.path.join(python_dir, _MARKER)):
        raise SglangSourceError(f"the installed sglang at {pkg} has no {_MARKER}")
    return SglangSource(root=python_dir, python_dir=python_dir, commit=_git_commit_of(python_dir),
                        tag=None, kind="installed")


def _extract_tag(tag: str, bundle: str, cache_dir: str) -> str:
    dest = os.path.join(cache_dir, tag)
    if os.path.isfile(os.path.join(dest, "python", _MARKER)):
        return dest
    tags = bundle_tags(bundle)
    if tag not in tags:
        raise SglangSourceError(f"unknown SGLang tag {tag!r} in {bundle}; known: {', '.join(tags)}")
    os.makedirs(cache_dir, exist_ok=True)
    # Extract beside the destination, then rename: concurrent extractions of one tag are safe
    # (the loser's rename fails and its copy is removed).
    tmp = tempfile.mkdtemp(prefix=f".{tag}.", dir=cache_dir)
    try:
        repo = os.path.join(tmp, "repo")
        _run_git(["init", "-q", "--bare", repo])
        _run_git(["fetch", "-q", bundle, f"refs/tags/{tag}:refs/tags/{tag}"], cwd=repo)
        message = _run_git(["log", "-1", "--format=%s", tag], cwd=repo)
        tree = os.path.join(tmp, "tree")
        os.makedirs(tree)
        archive = subprocess.run([_git(), "archive", "--format=tar", tag], cwd=repo, capture_output=True)
        if archive.returncode != 0:
            raise SglangSourceError(f"git archive {tag} failed: {archive.stderr.decode().strip()}")
        import io
        import tarfile
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tf:
            for member in tf.getmembers():
                if member.name.startswith("/") or ".." in member.name.split("/"):
                    raise SglangSourceError(f"unsafe path {member.name!r} in {tag}")
            tf.extractall(tree)
        m = _SLICE_MSG_RE.match(message.strip())
        with open(os.path.join(tree, ".kvsim-sglang-commit"), "w") as f:
            f.write((m.group(1) if m else tags[tag]) + "\n")
        try:
            os.rename(tree, dest)
        except OSError:
            if not os.path.isfile(os.path.join(dest, "python", _MARKER)):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _from_bundle(tag: str, bundle: Optional[str], cache_dir: Optional[str]) -> SglangSource:
    bundle = bundle or default_bundle_path()
    if not os.path.isfile(bundle):
        raise SglangSourceError(f"the SGLang bundle is missing: {bundle} (set KVSIM_SGLANG_BUNDLE)")
    dest = _extract_tag(tag, bundle, cache_dir or default_cache_dir())
    return SglangSource(root=dest, python_dir=os.path.join(dest, "python"),
                        commit=_commit_from_stamp(dest), tag=tag, kind="bundle")


def resolve_source(spec, *, bundle: Optional[str] = None, cache_dir: Optional[str] = None) -> SglangSource:
    """`spec`: a SglangSource (returned as is); a path (checkout root, its python/ folder or the
    sglang package folder); "installed" (the `sglang` on sys.path, not imported); "bundle:<tag>"
    or a bare tag such as "sglang-27659ea8c8" (extracted once from the bundle into cache_dir)."""
    if isinstance(spec, SglangSource):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise SglangSourceError(f"an SGLang source is a path, 'installed' or 'bundle:<tag>', not {spec!r}")
    text = os.fspath(spec)
    if text == "installed":
        return _installed()
    if text.startswith("bundle:"):
        tag = text[len("bundle:"):]
        if not tag.startswith("sglang-"):
            tag = "sglang-" + tag
        return _from_bundle(tag, bundle, cache_dir)
    if _TAG_RE.match(text) and not os.path.exists(text):
        return _from_bundle(text, bundle, cache_dir)
    return _from_dir(text)
