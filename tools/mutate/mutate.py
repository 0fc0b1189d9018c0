#!/usr/bin/env python3
"""Source-level mutation of C++ files (the engine of tools/mutation_score.sh). Stdlib only.

Operators, each one change on one line (a mutant never changes the line count, so __LINE__ in
assertions stays put and an object file can be compared with the original's):
  negate_cond     if (X) / while (X)        ->  if (!(X))
  cond_true       if (X)                    ->  if (true)        (the guard is dropped)
  cond_false      if (X)                    ->  if (false)       (the guarded branch is dropped)
  rel_boundary    <  <=  >  >=              ->  <= < >= >        (off-by-one in a comparison)
  eq_flip         ==  !=                    ->  != ==
  logic_flip      &&  ||                    ->  || &&
  arith_flip      a + b / a - b             ->  a - b / a + b    (off-by-one in a rounding)
  const_shift     integer literal 0 / 1 / N ->  1 / 0 / N+1
  delete_stmt     a one-line expression statement (call, assignment, ++/--) -> ';'
  return_flip     return true/false/N;      ->  return false/true/other;
  swap_args       f(a, b)                   ->  f(b, a)          (two plain arguments)
  stale_cache     a statement that keeps a cached value up to date (refresh_leaf, file_*,
                  index_child, a *_size_ / *count_ / *hash* / *_key / clock_ update) -> ';'
                  (a cached value left stale; such statements are this, never delete_stmt)
  skip_rollback   a give-back call (free*, release*, unlock, restore*, rollback*, undo*, erase)
                  right before a return (same or next line) -> ';' (a rollback skipped on a
                  failure path; such statements are this, never delete_stmt)
  policy_swap     return {A, B, ...};       ->  return {B, A, ...}  (a policy key's order)
                  std::min( / std::max(     ->  std::max( / std::min(

Lines are matched with comments and string literals blanked out. KV_ASSERT, KV_VERIFY and
KV_PROBE statements (all their lines, when the condition spans several), statements that only
call a checking function, and the bodies of checking functions (sanity_check, check, check_*,
*_problem, the policy references reference_*, the controller's load_sources/append_sources)
are not mutated: a weaker check is not a bug in the system, and a probe changes no behaviour.

Enumeration is deterministic: sites are sorted by (file, line, column, operator, text), and a
mutant's id is its index in that order. `--sample N --seed S` picks N ids with Python's
random.Random(S), which is the same on every platform.

Commands:
  list   FILES...                     one line per mutant: id, file:line:col, operator, diff
  sample --sample N --seed S FILES... the picked ids, one per line
  show   --id K FILES...              JSON of mutant K (file, line, before, after, function,
                                      probes: the probes in the same function, nearest first);
                                      --format '{file}:{line}' prints fields instead
  apply  --id K --root DIR FILES...   writes mutant K into DIR/<file> (FILES are relative to
                                      the current directory; DIR holds a copy of the tree)
  diff   --id K FILES...              a unified diff of mutant K
"""
import argparse
import difflib
import json
import os
import random
import re
import sys

SKIP_LINE = re.compile(r"\b(KV_ASSERT|KV_VERIFY|KV_PROBE|KV_PROBE_IF|static_assert)\b")
# Checking code: the checks, the policy references they compare against (reference_*), and
# the controller's recomputation of a load's sources for inflight.load_sources.
SKIP_FUNCTION = re.compile(
    r"^(sanity_check|check|check_\w*|\w+_problem|to_string|reference_\w*|load_sources|"
    r"append_sources)$")
# A statement that only calls a checking function (its result unused: the check asserts inside)
# is checking code too; deleting it or changing its arguments weakens a check, as a changed
# KV_ASSERT would (session 27's sample spent 2 of 28 survivors on such calls).
CHECK_CALL = re.compile(r"^\s*(?:[\w.\->]*?(?:\.|->))?(?:sanity_check|check_\w*|\w+_problem)\(.*\);\s*$")
FUNC_HEAD = re.compile(r"^[A-Za-z].*?\b([A-Za-z_]\w*)(?:::([A-Za-z_~]\w*))?\s*\(")
PROBE = re.compile(r"KV_PROBE(?:_IF)?\((?:[^;]*?,\s*)?(\w+)\);", re.S)
CACHE_NAME = re.compile(r"\b(refresh_leaf\w*|file_(?:device|host)_leaf|file_aux|index_child|"
                        r"unindex_child|\w+_size_|\w*count_|\w*hash\w*|\w+_key|clock_|"
                        r"device_children|\w+_occupied_)\b")
GIVE_BACK = re.compile(r"\b(free\w*|release\w*|unlock|restore\w*|rollback\w*|undo\w*|erase)\s*\(")
KEYWORDS = {"return", "if", "while", "for", "switch", "case", "else", "do", "break",
            "continue", "const", "auto", "static", "using", "namespace", "template",
            "typename", "class", "struct", "enum", "throw", "goto", "default", "delete", "new"}


def mask(line):
    """The line with string/char literals and // comments replaced by spaces."""
    out = []
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "/" and i + 1 < n and line[i + 1] == "/":
            out.append(" " * (n - i))
            break
        if c in "\"'":
            q = c
            out.append(c)
            i += 1
            while i < n and line[i] != q:
                if line[i] == "\\" and i + 1 < n:
                    out.append("  ")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            if i < n:
                out.append(q)
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def close_paren(text, open_at):
    """Index of the ')' matching the '(' at open_at, or -1 if not on this line."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def deletion_kind(stmt, next_line):
    """Which operator deletes this one-line statement: a rollback before a return, a cache
    update, or a plain statement."""
    if GIVE_BACK.search(stmt) and re.match(r"^\s*return\b", next_line):
        return "skip_rollback"
    if CACHE_NAME.search(stmt):
        return "stale_cache"
    return "delete_stmt"


def sites_in_line(m, next_line=""):
    """(col, end, operator, replacement) for every mutation of one masked line; next_line is
    the next non-blank masked line (a rollback is a give-back right before a return)."""
    out = []
    # A give-back call followed by a return on the same line: `{ free(x); return false; }`.
    for call in re.finditer(r"(?<=[{;]\s)([\w.\->*]+\([^;{}]*\);)(?=\s*return\b)", m):
        if GIVE_BACK.search(call.group(1)) and call.group(1).count("(") == call.group(1).count(")"):
            out.append((call.start(1), call.end(1), "skip_rollback", ";"))
    # Policy keys: the order of a returned brace list, min against max.
    r = re.match(r"^\s*return\s+\{\s*([\w.\->]+),\s*([\w.\->]+)\s*((?:,[^{}]*)?)\};", m)
    if r and r.group(1).strip() != r.group(2).strip():
        out.append((r.start(1), r.end(2), "policy_swap",
                    r.group(2).strip() + ", " + r.group(1).strip()))
    for mm in re.finditer(r"\bstd::(min|max)\(", m):
        out.append((mm.start(1), mm.end(1), "policy_swap",
                    "max" if mm.group(1) == "min" else "min"))
    # Conditions of if/while whose parentheses close on this line.
    for kw in re.finditer(r"\b(if|while)\s*\(", m):
        open_at = kw.end() - 1
        close = close_paren(m, open_at)
        if close < 0:
            continue
        cond = m[open_at + 1:close]
        if cond.strip() in ("true", "false") or "constexpr" in m[kw.start():open_at]:
            continue
        out.append((open_at + 1, close, "negate_cond", "!(" + cond + ")"))
        if kw.group(1) == "if":
            out.append((open_at + 1, close, "cond_true", "true"))
            out.append((open_at + 1, close, "cond_false", "false"))
    # Relational operators (not <<, >>, ->, template brackets: spaces on both sides).
    for op in re.finditer(r"(?<=\s)(<=|>=|<|>)(?=\s)", m):
        rep = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}[op.group(1)]
        out.append((op.start(), op.end(), "rel_boundary", rep))
    for op in re.finditer(r"(?<=\s)(==|!=)(?=\s)", m):
        out.append((op.start(), op.end(), "eq_flip", "!=" if op.group(1) == "==" else "=="))
    for op in re.finditer(r"(?<=\s)(&&|\|\|)(?=\s)", m):
        out.append((op.start(), op.end(), "logic_flip", "||" if op.group(1) == "&&" else "&&"))
    # Binary + and - between operands (clang-format puts spaces around binary operators).
    for op in re.finditer(r"(?<=[\w\)\]] )([+-])(?= [\w\(])", m):
        out.append((op.start(), op.end(), "arith_flip", "-" if op.group(1) == "+" else "+"))
    # Small integer literals in expressions (not in array sizes of declarations).
    for lit in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", m):
        v = int(lit.group(1))
        if v > 4096:
            continue
        rep = {0: "1", 1: "0"}.get(v, str(v + 1))
        out.append((lit.start(), lit.end(), "const_shift", rep))
    # return true/false/N
    r = re.match(r"^(\s*)return\s+(true|false|\d+)\s*;", m)
    if r:
        val = r.group(2)
        rep = {"true": "false", "false": "true", "0": "1"}.get(val, "0")
        out.append((r.start(2), r.end(2), "return_flip", rep))
    # One-line expression statements: call, assignment, ++/--.
    s = re.match(r"^(\s*)(\S.*;)\s*$", m)
    if s:
        stmt = s.group(2)
        head = re.match(r"^(\+\+|--)?([\w.\->\[\]*:]+?)\s*(\(|=[^=]|\+=|-=|\+\+|--|\|=)", stmt)
        first_word = re.match(r"^\w+", stmt)
        balanced = stmt.count("(") == stmt.count(")")
        if (head and balanced and (not first_word or first_word.group(0) not in KEYWORDS)
                and not stmt.startswith("}")):
            out.append((s.start(2), s.end(2), deletion_kind(stmt, next_line), ";"))
    # f(a, b) with two plain arguments.
    for call in re.finditer(r"\b(\w+)\(\s*([\w.\->*&]+),\s*([\w.\->*&]+)\s*\)", m):
        if call.group(1) in KEYWORDS or call.group(2) == call.group(3):
            continue
        out.append((call.start(2), call.end(3), "swap_args",
                    call.group(3) + ", " + call.group(2)))
    return out


def functions(lines):
    """Per line: the name of the enclosing top-level function (or '')."""
    names = []
    current = ""
    depth = 0
    for raw in lines:
        m = mask(raw)
        if depth == 0:
            head = FUNC_HEAD.match(m)
            if head and not m.rstrip().endswith(";"):
                current = head.group(2) or head.group(1)
        if re.match(r"^\s*(inline\s+)?namespace\b[^{]*\{", m) or re.match(r"^\s*extern\s+\"", raw):
            names.append("")
            continue  # namespace braces do not nest functions
        names.append(current if depth > 0 or "{" in m else "")
        depth += m.count("{") - m.count("}")
        if depth <= 0:
            depth = 0
    return names


def enumerate_file(path):
    with open(path) as f:
        lines = f.read().split("\n")
    funcs = functions(lines)
    sites = []
    open_parens = 0  # inside a skipped macro that spans lines (a KV_ASSERT's condition)
    for no, raw in enumerate(lines, start=1):
        if open_parens > 0:
            m = mask(raw)
            open_parens += m.count("(") - m.count(")")
            continue
        skip = SKIP_LINE.search(raw)
        if skip:
            m = mask(raw)[skip.start():]
            open_parens = max(0, m.count("(") - m.count(")"))
            continue
        if raw.lstrip().startswith(("#", "//")):
            continue
        func = funcs[no - 1]
        if not func or SKIP_FUNCTION.match(func):
            continue
        m = mask(raw)
        if CHECK_CALL.match(m):
            continue
        following = next((mask(x) for x in lines[no:no + 3] if x.strip()), "")
        for col, end, op, rep in sites_in_line(m, following):
            before = raw[col:end]
            if before == rep:
                continue
            sites.append({"file": path, "line": no, "col": col, "end": end, "op": op,
                          "before": before, "after": rep, "function": func})
    return sites


def all_sites(files):
    sites = []
    for f in sorted(set(files)):
        sites.extend(enumerate_file(f))
    sites.sort(key=lambda s: (s["file"], s["line"], s["col"], s["op"], s["after"]))
    for i, s in enumerate(sites):
        s["id"] = i
    return sites


def mutated_text(site):
    with open(site["file"]) as f:
        lines = f.read().split("\n")
    raw = lines[site["line"] - 1]
    lines[site["line"] - 1] = raw[:site["col"]] + site["after"] + raw[site["end"]:]
    return "\n".join(lines)


def probes_near(site):
    """The probes in the site's function, nearest line first (a probe may span lines)."""
    with open(site["file"]) as f:
        lines = f.read().split("\n")
    funcs = functions(lines)
    found = []
    for no, raw in enumerate(lines, start=1):
        if funcs[no - 1] != site["function"] or "KV_PROBE" not in raw:
            continue
        text = "\n".join(lines[no - 1:no + 4])
        for p in PROBE.finditer(text):
            found.append((abs(no - site["line"]), no, p.group(1)))
    found.sort()
    seen = []
    for _, _, name in found:
        if name not in seen:
            seen.append(name)
    return seen


def unified(site):
    with open(site["file"]) as f:
        before = f.read()
    after = mutated_text(site)
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        "a/" + site["file"], "b/" + site["file"], n=1))


def pick(sites, n, seed):
    ids = [s["id"] for s in sites]
    if n >= len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, n))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["list", "sample", "show", "apply", "diff", "count"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--id", type=int)
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--root")
    ap.add_argument("--format", help="show: a str.format template over the JSON fields")
    a = ap.parse_args(argv)
    for f in a.files:
        if not os.path.isfile(f):
            print(f"mutate.py: {f}: no such file", file=sys.stderr)
            return 2
    sites = all_sites(a.files)
    if a.command == "count":
        print(len(sites))
        return 0
    if a.command == "list":
        for s in sites:
            print(f'{s["id"]}\t{s["file"]}:{s["line"]}:{s["col"] + 1}\t{s["op"]}\t'
                  f'{s["before"]!r} -> {s["after"]!r}')
        return 0
    if a.command == "sample":
        if a.sample <= 0:
            print("mutate.py: --sample N needs N > 0", file=sys.stderr)
            return 2
        for i in pick(sites, a.sample, a.seed):
            print(i)
        return 0
    if a.id is None or not 0 <= a.id < len(sites):
        print(f"mutate.py: --id must be in 0..{len(sites) - 1}", file=sys.stderr)
        return 2
    site = sites[a.id]
    if a.command == "show":
        out = dict(site)
        out["probes"] = probes_near(site)
        if a.format:
            out["probes"] = ", ".join(out["probes"]) or "none"
            print(a.format.format(**out))
        else:
            print(json.dumps(out))
    elif a.command == "diff":
        sys.stdout.write(unified(site))
    elif a.command == "apply":
        if not a.root:
            print("mutate.py: apply needs --root DIR", file=sys.stderr)
            return 2
        dest = os.path.join(a.root, site["file"])
        text = mutated_text(site)  # read before dest (possibly the same file) is truncated
        with open(dest, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
