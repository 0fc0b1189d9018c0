#!/usr/bin/env python3
"""The scenario reference is usable on its own (docs/scenario-reference.md, `kvsim schema`).

scenario_reference.py KVSIM SOURCE_DIR MODE

  validate  every scenarios/*.json and the reference's example validate against `kvsim schema`
            (python3-jsonschema, Draft 2020-12), and known-bad scenarios from tests/data do not;
            exit 77 (skipped) without the jsonschema module.
  defaults  a scenario written only from the schema's documented defaults runs, with the same
            event hash as the one-line scenario that leaves every field out; the reference's
            first example runs, with the same hash as its written-out form.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def run(kvsim, path):
    p = subprocess.run([kvsim, "run", path], capture_output=True, text=True)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"kvsim run {path}: exit {p.returncode}\n{out}")
    m = re.search(r"event hash ([0-9a-f]+)", out)
    if not m or not re.search(r"seed \d+: ok", out):
        sys.exit(f"kvsim run {path}: no 'ok' and event hash\n{out}")
    return m.group(1)


def schema_of(kvsim):
    p = subprocess.run([kvsim, "schema"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def reference_blocks(source):
    with open(os.path.join(source, "docs", "scenario-reference.md")) as f:
        text = f.read()
    blocks = re.findall(r"```json\n(.*?)\n```", text, re.S)
    if len(blocks) < 2:
        sys.exit("docs/scenario-reference.md: expected the example and its written-out form")
    return [json.loads(b) for b in blocks[:2]]


def defaults(schema):
    """The object made of every documented default (sections recursively)."""
    out = {}
    for name, prop in schema.get("properties", {}).items():
        if "default" in prop:
            out[name] = prop["default"]
        elif prop.get("type") == "object":
            out[name] = defaults(prop)
    return out


def mode_validate(kvsim, source):
    try:
        import jsonschema
    except ImportError:
        print("jsonschema (python3-jsonschema) is not installed: skipped")
        return SKIP
    schema = schema_of(kvsim)
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    good = sorted(
        os.path.join(source, "scenarios", n)
        for n in os.listdir(os.path.join(source, "scenarios"))
        if n.endswith(".json"))
    if len(good) < 5:
        sys.exit(f"only {len(good)} scenarios found")
    failures = []
    for path in good:
        with open(path) as f:
            errors = [e.message for e in v.iter_errors(json.load(f))]
        if errors:
            failures.append(f"{path}: {errors}")
    for i, doc in enumerate(reference_blocks(source)):
        errors = [e.message for e in v.iter_errors(doc)]
        if errors:
            failures.append(f"reference example {i}: {errors}")
    # The schema rejects what the parser rejects for type, name and range.
    data = os.path.join(source, "tests", "data")
    bad_files = ["bad_unknown_field.json", "bad_wrong_type.json", "bad_range_huge.json",
                 # rules between fields that the schema states (allOf)
                 "bad_storage_flat.json", "bad_trace_on_uniform.json",
                 "bad_swa_pool_no_window.json"]
    for bad in bad_files:
        with open(os.path.join(data, bad)) as f:
            if v.is_valid(json.load(f)):
                failures.append(f"{bad}: the schema accepts it, kvsim does not")
    if v.is_valid({"description": "no name"}):
        failures.append("a scenario without name validates")
    if v.is_valid({"name": "m", "workload": {"kind": "mooncake"}}):
        failures.append("a mooncake workload without a trace validates")
    for doc in [{"scheduler": {"mode": "pd"}, "cache": {"storage": True}},
                {"scheduler": {"mode": "pd"}, "cache": {"swa_window_tokens": 16}},
                {"cache": {"sparse_index_bytes_per_page": 32}}]:
        if v.is_valid(dict(doc, name="pd")):
            failures.append(f"{doc} validates")
    if not v.is_valid({"name": "m", "cache": {"storage": {"enabled": False},
                                              "hierarchical": False}}):
        failures.append("a disabled storage tier on a flat cache does not validate")
    if failures:
        sys.exit("\n".join(failures))
    print(f"{len(good)} scenarios and the reference's examples validate; "
          f"{len(bad_files) + 5} bad ones do not")
    return 0


def mode_defaults(kvsim, source):
    schema = schema_of(kvsim)
    full = defaults(schema)
    full["name"] = "defaults"
    if len(full.get("cache", {})) < 15 or len(full.get("workload", {})) < 10:
        sys.exit(f"the schema documents too few defaults: {full}")
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, doc):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                json.dump(doc, f)
            return path
        h_full = run(kvsim, write("full.json", full))
        h_min = run(kvsim, write("min.json", {"name": "defaults"}))
        if h_full != h_min:
            sys.exit(f"documented defaults give event hash {h_full}, the parser's {h_min}:\n"
                     f"{json.dumps(full, indent=1)}")
        example, written_out = reference_blocks(source)
        h_ex = run(kvsim, write("example.json", example))
        h_out = run(kvsim, write("written_out.json", written_out))
        if h_ex != h_out:
            sys.exit(f"the reference's example ({h_ex}) and its written-out form ({h_out}) "
                     "differ: regenerate docs/scenario-reference.md")
    print(f"documented defaults: {h_full} (= leaving every field out); example: {h_ex}")
    return 0


def main():
    kvsim, source, mode = sys.argv[1:4]
    return {"validate": mode_validate, "defaults": mode_defaults}[mode](kvsim, source)


if __name__ == "__main__":
    sys.exit(main())
