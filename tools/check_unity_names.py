#!/usr/bin/env python3
"""Fails when two files of one unity batch define the same internal name.

A unity batch (cmake/KvsimUnity.cmake, KVSIM_UNITY=ON) compiles several .cpp files as one
translation unit, so their anonymous namespaces merge. Two helpers of the same name then either
fail to compile (a redefinition) or, worse, compile: overload resolution may quietly send one
file's calls to the other file's helper (a better match: non-const over const, an exact integer
type, a default argument). This check finds such pairs before either can happen.

It reads the batch files a configured build wrote (BUILD_DIR/**/kvsim_unity/*.cpp) and, in each
file they include, the names declared at the top level of `namespace {` blocks (functions,
variables, constants, types) and the `static` functions and variables at namespace scope. It is a line-based reading of the project's own formatting
(clang-format), not a C++ parser.

Usage: tools/check_unity_names.py BUILD_DIR [SOURCE_DIR]
"""

import pathlib
import re
import sys

# A declaration at the anonymous namespace's top level (no indentation): the declared name is the
# last identifier before '(', '=', '{', ';' or '[' that is not a keyword.
DECL = re.compile(
    r"^(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|constexpr|const|extern|thread_local)\s+)*"
    r"(?:(?:class|struct|enum(?:\s+class)?|using)\s+(?P<type>\w+)"
    r"|[\w:<>,\*&\s]+?[\s\*&](?P<name>\w+)\s*(?:\(|=|\{|;|\[))")
KEYWORDS = {"return", "if", "for", "while", "switch", "namespace", "operator", "else", "case"}


def anonymous_names(path):
    """Names declared at the top level of the file's anonymous namespaces, with line numbers."""
    names = {}
    depth_in_anon = None  # brace depth at which the current anonymous namespace opened
    depth = 0
    in_comment = False
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = raw
        if in_comment:
            if "*/" not in line:
                continue
            line = line.split("*/", 1)[1]
            in_comment = False
        line = re.sub(r"//.*", "", line)
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        if "/*" in line and "*/" not in line:
            in_comment = True
            line = line.split("/*", 1)[0]
        if re.match(r"^\s*namespace\s*\{", line):
            depth_in_anon = depth
        elif re.match(r"^static\s(?!_assert)", line) and (m := DECL.match(line)):
            # internal linkage outside an anonymous namespace (clang-format puts it at column 0
            # only at namespace scope)
            names.setdefault(m.group("type") or m.group("name"), number)
        elif depth_in_anon is not None and depth == depth_in_anon + 1 and raw[:1] not in (" ", "\t", "}", "#"):
            # using-declarations and namespace aliases of one entity may repeat; a clashing alias
            # fails to compile, it cannot change a call.
            m = None if re.match(r"^(using|namespace)\b", line) else DECL.match(line)
            if m:
                name = m.group("type") or m.group("name")
                if name and name not in KEYWORDS:
                    names.setdefault(name, number)
        depth += line.count("{") - line.count("}")
        if depth_in_anon is not None and depth <= depth_in_anon:
            depth_in_anon = None
    return names


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build = pathlib.Path(argv[1])
    source = pathlib.Path(argv[2]) if len(argv) == 3 else pathlib.Path(__file__).resolve().parents[1]
    batches = sorted(build.glob("**/kvsim_unity/*.cpp"))
    if not batches:
        print(f"check_unity_names: no unity batches under {build} (configure with -DKVSIM_UNITY=ON)",
              file=sys.stderr)
        return 2
    clashes = 0
    for batch in batches:
        seen = {}  # name -> (file, line)
        for include in re.findall(r'^#include "([^"]+)"', batch.read_text(), re.M):
            path = source / include
            for name, number in anonymous_names(path).items():
                if name in seen:
                    other, other_line = seen[name]
                    print(f"{include}:{number}: '{name}' is also defined in {other}:{other_line}, "
                          f"in the same unity batch ({batch.name}): rename one")
                    clashes += 1
                else:
                    seen[name] = (include, number)
    print(f"check_unity_names: {len(batches)} batches, {clashes} clashing names")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
