#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md, so that they cannot go stale (ctest docs.examples).

Two markers, each an HTML comment on the line before a fenced block:

  <!-- check-examples ... -->          the ```sh block below: every line that is not blank or a
                                       comment is run with bash, in order; it must exit 0, or N
                                       where its comment says "# exit N"
  <!-- output-of: COMMAND -->          the ``` block below is what COMMAND prints (stdout, then
                                       stderr): checked, or rewritten with --update

Each document runs in a fresh temporary folder holding links to the checkout's scenarios/,
traces/, tests/ and tools/, with the kvsim under test first on PATH, so the commands run as a
reader types them. Standard library only.

Usage: check_docs_examples.py KVSIM [--update] [FILE.md ...]   (default: README.md docs/*.md)
Exit 0 when every example ran as written, 1 otherwise (each failure named with file and line).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKED = ("scenarios", "traces", "tests", "tools", "python")
EXIT = re.compile(r"#\s*exit (\d+)")
TIMEOUT_S = 600


def fenced_block(lines, i):
    """(first content line, closing fence line) of the fenced block opening at or after i."""
    j = i
    while j < len(lines) and not lines[j].startswith("```"):
        if lines[j].strip():
            return None
        j += 1
    if j == len(lines):
        return None
    k = j + 1
    while k < len(lines) and not lines[k].startswith("```"):
        k += 1
    return (j + 1, k) if k < len(lines) else None


def run(command, cwd, env):
    try:
        p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % TIMEOUT_S
    return p.returncode, p.stdout + p.stderr


def check_file(path, kvsim, update):
    """Returns the list of failures ("file:line: why") of one document."""
    rel = os.path.relpath(path, ROOT)
    lines = open(path, encoding="utf-8").read().split("\n")
    failures = []
    changed = False
    work = tempfile.mkdtemp(prefix="kvsim-docs-")
    try:
        for name in LINKED:
            os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(os.path.abspath(kvsim)) + os.pathsep + env.get("PATH", "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        i = 0
        ran = 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("<!-- check-examples"):
                while "-->" not in lines[i]:
                    i += 1
                block = fenced_block(lines, i + 1)
                if block is None:
                    failures.append("%s:%d: check-examples marker without a block" % (rel, i + 1))
                    i += 1
                    continue
                for n in range(*block):
                    command = lines[n].strip()
                    if not command or command.startswith("#"):
                        continue
                    m = EXIT.search(command)
                    want = int(m.group(1)) if m else 0
                    code, out = run(command, work, env)
                    ran += 1
                    if code != want:
                        failures.append("%s:%d: `%s` exited %s, expected %d\n%s" % (
                            rel, n + 1, command, code, want, out[-2000:]))
                i = block[1] + 1
                continue
            m = re.match(r"<!-- output-of: (.*) -->$", line)
            if m:
                block = fenced_block(lines, i + 1)
                if block is None:
                    failures.append("%s:%d: output-of marker without a block" % (rel, i + 1))
                    i += 1
                    continue
                code, out = run(m.group(1), work, env)
                ran += 1
                got = out.replace(work + "/", "").rstrip("\n").split("\n")
                have = lines[block[0]:block[1]]
                if code is None:
                    failures.append("%s:%d: `%s` %s" % (rel, i + 1, m.group(1), out))
                elif got != have:
                    if update:
                        lines[block[0]:block[1]] = got
                        changed = True
                        block = (block[0], block[0] + len(got))
                    else:
                        diff = [l for l in got if l not in have][:5]
                        failures.append(
                            "%s:%d: the output of `%s` differs from the block below it "
                            "(tools/check_docs_examples.py --update rewrites it); new lines:\n  %s"
                            % (rel, i + 1, m.group(1), "\n  ".join(diff)))
                i = block[1] + 1
                continue
            i += 1
        if changed:
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            print("updated %s" % rel)
        if ran:
            print("%s: %d example(s) run" % (rel, ran))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kvsim", help="the kvsim binary under test")
    ap.add_argument("--update", action="store_true", help="rewrite output-of blocks")
    ap.add_argument("files", nargs="*")
    a = ap.parse_intermixed_args()
    if not os.access(a.kvsim, os.X_OK):
        print("check_docs_examples: %s is not an executable" % a.kvsim, file=sys.stderr)
        return 2
    files = a.files or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))
    failures = []
    for f in files:
        failures += check_file(os.path.abspath(f), a.kvsim, a.update)
    for f in failures:
        print("FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
