#!/usr/bin/env python3
"""Copies the git-tracked (and untracked, not ignored) files of SRC into DEST, writing only
the files whose content differs, so an incremental build of DEST rebuilds only what changed.
Usage: sync_tree.py SRC DEST"""
import os
import subprocess
import sys


def main(src, dest):
    out = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], check=True, capture_output=True).stdout
    written = 0
    for rel in sorted(p for p in out.decode().split("\0") if p):
        s = os.path.join(src, rel)
        if not os.path.isfile(s):
            continue
        d = os.path.join(dest, rel)
        with open(s, "rb") as f:
            data = f.read()
        if os.path.isfile(d):
            with open(d, "rb") as f:
                if f.read() == data:
                    continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        with open(d, "wb") as f:
            f.write(data)
        os.chmod(d, os.stat(s).st_mode & 0o777)
        written += 1
    print(f"sync_tree: {written} files written to {dest}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
