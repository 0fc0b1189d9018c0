"""kvsim import-sglang against dumps that are odd or hostile in shape rather than in opcode:
SGLang classes the importer does not know, structures that share sub-objects, mixed key types,
extreme times, an unreadable dump in a folder, a file name that is not UTF-8 (issue 29), and a
Hypothesis generator of such pickles: every one exits 0 or 2, runs nothing, and stays within
bounded time and memory.
"""

import datetime
import json
import os
import pickle
import resource
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "python", "kvsim", "import_sglang.py")
sys.path.insert(0, HERE)

from sglang_standins import (GenerateReqInput, ServerArgs, _module, dump_doc,  # noqa: E402
                             finished_out, write_dump)

MEMORY_LIMIT = 1 << 31  # address space of one import (bytes)
TIME_LIMIT = 30  # seconds


class CudaGraphConfig:
    """Pickles as an SGLang class the importer does not know (a dataclass's __dict__ state)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


CudaGraphConfig.__module__ = "sglang.srt.model_executor.cuda_graph_config"
setattr(_module(CudaGraphConfig.__module__), "CudaGraphConfig", CudaGraphConfig)


class SglangCall:
    """REDUCE of an SGLang function: an importer that ran it would import sglang (see below)."""

    def __reduce__(self):
        return (_sglang_function, ("/", True))


def _sglang_function(*args):
    raise AssertionError("stand-in: never called")


_sglang_function.__module__ = "sglang.srt.utils"
_sglang_function.__qualname__ = "kill_process_tree"
setattr(_module("sglang.srt.utils"), "kill_process_tree", _sglang_function)


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch %s" % self.marker,))


def req(ids, rid, t):
    obj = GenerateReqInput(input_ids=ids, rid=rid, sampling_params={"max_new_tokens": 4})
    return (obj, finished_out(len(ids), 2, 0), t, t + 1.0)


def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(tmp_path, *args):
    """The importer in its own process, as `kvsim import-sglang` runs it, with a `sglang`
    package on its path whose import leaves a marker: the importer must never import it."""
    trap = tmp_path / "trap"
    if not trap.exists():
        (trap / "sglang").mkdir(parents=True)
        (trap / "sglang" / "__init__.py").write_text(
            "open(%r, 'w').close()\n" % str(tmp_path / "sglang_imported"))
    env = dict(os.environ, PYTHONPATH=str(trap))
    p = subprocess.run([sys.executable, SCRIPT, *[str(a) for a in args]], capture_output=True,
                       timeout=TIME_LIMIT, env=env, preexec_fn=_limits)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert not (tmp_path / "sglang_imported").exists()
    return p.returncode, out, err


def first_line(s):
    return s.splitlines()[0] if s else ""


def read_header(path):
    text = path.read_bytes().decode("utf-8")  # strict: the trace is UTF-8
    lines = [json.loads(line) for line in text.splitlines()]
    # kvsim's JSON reader refuses an escaped lone surrogate (\udcff): every string must be one
    # that UTF-8 can encode.
    json.dumps(lines, ensure_ascii=False).encode("utf-8")
    return lines[0]


def test_an_unknown_sglang_class_is_read_as_inert_data(tmp_path):
    sa = ServerArgs(page_size=16)
    doc = dump_doc([req([1, 2, 3], "a", 1.0), SglangCall()], sa)
    doc["resolved_config"] = None
    sa.cuda_graph_config = CudaGraphConfig(max_bs=8, disable=False)  # as __post_init__ sets it
    write_dump(str(tmp_path / "d.pkl"), doc)
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    assert first_line(out).endswith("1 requests imported from 1 dump(s) (1 finished, "
                                    "0 unfinished, 0 aborted); 1 skipped, 0 duplicates merged")
    assert "note sglang_classes: 2 SGLang class(es)" in err
    assert "sglang.srt.model_executor.cuda_graph_config.CudaGraphConfig" in err
    header = read_header(tmp_path / "w.jsonl")
    assert header["scenario"]["cache"]["page_size"] == 16


def dag(depth, leaf):
    x = leaf
    for _ in range(depth):
        x = [x, x]  # pickled once per level (the memo): 2^depth leaves as a tree
    return x


def tuple_dag(depth):
    x = (1,)
    for _ in range(depth):
        x = (x, x)
    return x


def test_shared_references_in_the_configuration_do_not_hang(tmp_path):
    sa = ServerArgs(hicache_storage_backend="file")
    doc = dump_doc([req([1, 2, 3], "a", 1.0)], sa)  # (asdict copies: the DAG goes in after)
    doc["resolved_config"] = None
    sa.page_size = dag(60, 1)
    sa.hicache_storage_backend_extra_config = dag(60, "x")
    doc["requests"][0][0].extra_key = tuple_dag(60)
    write_dump(str(tmp_path / "d.pkl"), doc)
    assert os.path.getsize(tmp_path / "d.pkl") < 4096
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    assert "1 requests imported" in first_line(out)
    assert "note page_size: value [[[[" in err
    read_header(tmp_path / "w.jsonl")


def test_configuration_keys_of_mixed_types_are_ignored_with_a_note(tmp_path):
    doc = dump_doc([req([1, 2, 3], "a", 1.0)], ServerArgs())
    doc["resolved_config"] = {"page_size": 4, 1: "one", (2, 3): "pair", None: 0, b"k": 1}
    write_dump(str(tmp_path / "d.pkl"), doc)
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    assert "1 requests imported" in first_line(out)
    assert "note configuration_keys: 4 configuration key(s) that are not argument names" in err
    assert read_header(tmp_path / "w.jsonl")["scenario"]["cache"]["page_size"] == 4


@pytest.mark.parametrize("created", [1e308, -1e308, datetime.datetime.min,
                                     datetime.datetime.max, float("nan")])
def test_extreme_created_times_skip_the_request(tmp_path, created):
    doc = dump_doc([req([1, 2, 3], "a", 1.0), req([4, 5, 6], "b", 1.0)], ServerArgs())
    doc["requests"][1] = doc["requests"][1][:2] + (created, 2.0)
    write_dump(str(tmp_path / "d.pkl"), doc)
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    assert "1 requests imported" in first_line(out) and "1 skipped" in first_line(out)
    assert "request 1: field created_time:" in err


def test_times_too_far_apart_for_the_tick_are_a_clear_error(tmp_path):
    doc = dump_doc([req([1, 2, 3], "a", -9e10), req([4, 5, 6], "b", 9e10)], ServerArgs())
    write_dump(str(tmp_path / "d.pkl"), doc)
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 2
    assert first_line(err).startswith("kvsim: %s: request 1: field created_time:" %
                                      (tmp_path / "d.pkl"))
    assert "more than 2^39 ticks" in err


def test_an_unreadable_dump_in_a_folder_is_skipped_with_a_note(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    write_dump(str(folder / "a.pkl"), dump_doc([req([1, 2, 3], "a", 1.0)], ServerArgs()))
    (folder / "b.pkl").write_bytes(b"\x80\x04not a pickle")
    rc, out, err = run_cli(tmp_path, folder, "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    assert "1 requests imported from 1 dump(s)" in first_line(out)
    assert "skipped dump %s: " % (folder / "b.pkl") in err
    assert read_header(tmp_path / "w.jsonl")["import"]["skipped_dumps"] == 1
    # named on the command line, the same file is an error
    rc, out, err = run_cli(tmp_path, folder / "b.pkl", "-o", tmp_path / "w.jsonl")
    assert rc == 2


def test_a_file_name_that_is_not_utf8_gives_a_trace_kvsim_reads(tmp_path):
    name = os.fsdecode(b"dump-\xff\xfe.pkl")
    write_dump(os.path.join(str(tmp_path), name), dump_doc([req([1, 2, 3], "a", 1.0)],
                                                          ServerArgs()))
    rc, out, err = run_cli(tmp_path, tmp_path, "-o", tmp_path / "w.jsonl")
    assert rc == 0, err
    header = read_header(tmp_path / "w.jsonl")
    assert header["import"]["dumps"][0].endswith("dump-\\udcff\\udcfe.pkl")
    # Without -o the output is named after the dump: its name is written, never raised on.
    rc, out, err = subprocess.run([sys.executable, SCRIPT, os.path.join(str(tmp_path), name)],
                                  capture_output=True, cwd=str(tmp_path)).returncode, "", ""
    assert rc == 0


# --- a generator of hostile pickles ----------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

EXTREME_INTS = [0, -1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**400]
EXTREME_FLOATS = [1e308, -1e308, float("inf"), float("-inf"), float("nan"), 5e-324, -0.0]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from(EXTREME_INTS),
    st.floats(allow_nan=True), st.sampled_from(EXTREME_FLOATS),
    st.text(max_size=20), st.sampled_from(["\ud800", "x\udcff", ""]), st.binary(max_size=20),
    st.sampled_from([datetime.datetime.min, datetime.datetime.max, datetime.date.min,
                     datetime.timedelta.max]))
keys = st.one_of(st.text(max_size=10), st.integers(-5, 5), st.none(), st.booleans(),
                 st.tuples(st.integers(0, 3), st.text(max_size=3)), st.binary(max_size=4),
                 st.sampled_from(["page_size", "max_total_tokens", "hicache_ratio",
                                  "chunked_prefill_size", "radix_eviction_policy"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(keys, inner, max_size=4),
                            st.frozensets(st.integers(0, 9), max_size=3)),
    max_leaves=20)


@st.composite
def hostile_dumps(draw):
    """A dump-shaped dict whose parts are drawn: values of every type and extreme, shared
    sub-structures (DAGs up to 64 levels), mixed keys, unknown SGLang classes, code by REDUCE."""
    shared = dag(draw(st.integers(0, 64)), draw(values))
    # (The DAG is picked by index, never wrapped in a strategy: Hypothesis would format it.)
    pick = st.integers(0, 3).flatmap(
        lambda k: values if k == 0 else
        values.map(lambda v: CudaGraphConfig(v=v)) if k == 2 else
        st.just(None).map(lambda _: shared if k == 1 else SglangCall()))
    part = pick
    requests = []
    for i in range(draw(st.integers(0, 4))):
        ids = draw(st.one_of(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=8), part))
        obj = GenerateReqInput(input_ids=ids, rid=draw(st.one_of(st.text(max_size=4), part)),
                               extra_key=draw(st.one_of(st.none(), part)))
        out = draw(st.one_of(st.just(finished_out(3, 2, 0)), part))
        created = draw(st.one_of(st.floats(0, 2e9), part))
        requests.append(draw(st.one_of(st.just((obj, out, created, 1.0)), part)))
    sa = ServerArgs()
    for name in draw(st.lists(st.sampled_from(["page_size", "hicache_ratio", "max_total_tokens",
                                               "hicache_storage_backend", "tp_size"]),
                              max_size=3)):
        setattr(sa, name, draw(part))
    doc = {"server_args": draw(st.one_of(st.just(sa), st.none(), part)),
           "config_updates": draw(st.one_of(st.just([]), part)),
           "resolved_config": draw(st.one_of(st.none(), st.dictionaries(keys, part, max_size=6))),
           "requests": requests}
    if draw(st.booleans()):
        doc[draw(keys)] = draw(part)
    return doc, draw(st.booleans()), draw(st.integers(0, pickle.HIGHEST_PROTOCOL))


# ~0.1 s a case (a process each). No shrinking: a failing case is printed as drawn.
@hypothesis.settings(max_examples=40, deadline=None, database=None,
                     phases=[hypothesis.Phase.generate],
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(case=hostile_dumps())
def test_generated_pickles_exit_0_or_2_and_run_nothing(tmp_path_factory, case):
    doc, evil, protocol = case
    tmp_path = tmp_path_factory.mktemp("gen")
    marker = tmp_path / "pwned"
    if evil:
        doc["requests"].append((Evil(marker), {}, 1.0, 2.0))
    write_dump(str(tmp_path / "d.pkl"), doc, protocol)
    rc, out, err = run_cli(tmp_path, tmp_path / "d.pkl", "-o", tmp_path / "w.jsonl")
    assert rc in (0, 2), (rc, err)
    assert not marker.exists()
    if evil:
        assert rc == 2 and "is not allowed" in err
    if rc == 0:
        read_header(tmp_path / "w.jsonl")
