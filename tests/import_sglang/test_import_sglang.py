"""Tests of kvsim import-sglang (python/kvsim/import_sglang.py).

Every dump is written here by pickling stand-ins of SGLang's classes under SGLang's module and
class names (sglang_standins.py), in the shape tokenizer_manager.py writes: one per shape
(finished, unfinished, aborted, text-only, server_args None, HiCache on and off), and hostile
ones (globals outside the allow-list, os.system by reduce, truncation, deep nesting, 10^6
requests, absurd sizes). Each imports to the expected workload or fails with the expected
message, exit code 2, and never a traceback.
"""

import importlib.util
import json
import os
import pickle
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "python", "kvsim", "import_sglang.py")
sys.path.insert(0, HERE)

from sglang_standins import (GenerateReqInput, LoRARef, NumpyIds, ServerArgs,  # noqa: E402
                             dump_doc, finished_out, write_dump, write_numpy_dump)

_spec = importlib.util.spec_from_file_location("kvsim_import_sglang", SCRIPT)
imp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(imp)

SYSTEM = list(range(1000, 1064))  # a 64-token shared system prompt


def req(ids, rid, t, completion=4, cached=0, details=None, **kw):
    obj = GenerateReqInput(input_ids=ids, rid=rid, sampling_params={"max_new_tokens": 16}, **kw)
    return (obj, finished_out(len(ids) if isinstance(ids, list) else 0, completion, cached, details), t, t + 1.0)


def run_import(tmp_path, doc, *args, name="dump.pkl", protocol=pickle.DEFAULT_PROTOCOL):
    path = tmp_path / name
    write_dump(str(path), doc, protocol)
    out = tmp_path / "w.jsonl"
    rc = imp.main([str(path), "-o", str(out), *args])
    return rc, out


def read_trace(out):
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    return lines[0], lines[1:]


def run_cli(*args):
    """The importer as the user runs it (a separate process): exit code and stderr."""
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                       timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout + p.stderr


# --- shapes -----------------------------------------------------------------------------------


def test_finished_requests_map_to_arrivals(tmp_path):
    sa = ServerArgs(page_size=4, max_total_tokens=4096, chunked_prefill_size=64,
                    max_running_requests=8)
    reqs = [req(SYSTEM + [1, 2, 3, 4], "a", 100.0, completion=5, cached=0),
            req(SYSTEM + [9, 9], "b", 100.25, completion=3, cached=64,
                details={"device": 60, "host": 4}),
            req(SYSTEM + [7], "c", 100.125, completion=1, cached=64)]
    rc, out = run_import(tmp_path, dump_doc(reqs, sa))
    assert rc == 0
    header, arrivals = read_trace(out)
    assert [a["reported"]["sglang_rid"] for a in arrivals] == ["a", "c", "b"]  # time order
    assert [a["tick"] for a in arrivals] == [0, 125, 250]
    assert [a["rid"] for a in arrivals] == [1, 2, 3]
    assert arrivals[0]["prompt"] == SYSTEM + [1, 2, 3, 4]
    assert [a["output_len"] for a in arrivals] == [5, 1, 3]
    assert all("abort_at" not in a for a in arrivals)
    assert arrivals[2]["reported"] == {"cached_tokens": 64, "device": 60, "host": 4,
                                       "prompt_tokens": 66, "sglang_rid": "b"}
    s = header["scenario"]
    assert s["cache"]["page_size"] == 4 and s["cache"]["device_tokens"] == 4096
    assert s["cache"]["hierarchical"] is False
    assert s["scheduler"]["chunk_tokens"] == 64 and s["scheduler"]["max_running"] == 8
    assert header["import"]["finished"] == 3 and header["import"]["config_from"] == \
        "resolved_config"


def test_ms_per_tick_scales_arrivals(tmp_path):
    reqs = [req([1, 2], "a", 5.0), req([3, 4], "b", 7.0)]
    rc, out = run_import(tmp_path, dump_doc(reqs, ServerArgs()), "--ms-per-tick", "10")
    assert rc == 0
    assert [a["tick"] for a in read_trace(out)[1]] == [0, 200]


def test_unfinished_requests_become_aborts_at_their_last_state(tmp_path):
    sa = ServerArgs()
    crash_out = {"text": "partial", "output_ids": [5, 6, 7]}  # state.get_crash_dump_output()
    last_chunk = finished_out(3, 2, 0, finish=None)  # state.out_list[-1], not finished
    aborted = finished_out(3, 1, 0, finish="abort")
    nothing = {}  # never produced output
    reqs = [(GenerateReqInput(input_ids=[1, 2, 3], rid="u1"), crash_out, 1.0, 2.0),
            (GenerateReqInput(input_ids=[1, 2, 4], rid="u2"), last_chunk, 1.1, 2.0),
            (GenerateReqInput(input_ids=[1, 2, 5], rid="ab"), aborted, 1.2, 2.0),
            (GenerateReqInput(input_ids=[1, 2, 6], rid="u0"), nothing, 1.3, 2.0)]
    rc, out = run_import(tmp_path, dump_doc(reqs, sa))
    assert rc == 0
    header, arrivals = read_trace(out)
    assert [(a["abort_at"], a["output_len"]) for a in arrivals] == [(3, 3), (2, 2), (1, 1),
                                                                    (0, 1)]
    assert header["import"]["unfinished"] == 3 and header["import"]["aborted"] == 1


def test_text_only_requests_get_a_flagged_deterministic_stand_in(tmp_path, capsys):
    shared = "You are a helpful assistant. "  # 29 bytes: 7 whole 4-byte chunks
    reqs = [(GenerateReqInput(text=shared + "What is 2+2?", rid="t1"),
             finished_out(9, 2, 0), 1.0, 2.0),
            (GenerateReqInput(text=shared + "Name a color.", rid="t2"),
             finished_out(9, 2, 4), 1.5, 2.0)]
    rc, out = run_import(tmp_path, dump_doc(reqs, ServerArgs()))
    assert rc == 0
    header, arrivals = read_trace(out)
    a, b = arrivals[0]["prompt"], arrivals[1]["prompt"]
    assert len(a) == -(-len((shared + "What is 2+2?").encode()) // 4)
    assert a[:7] == b[:7] and a[7] != b[7]  # the shared text gives shared tokens
    assert a == imp.standin_tokens(shared + "What is 2+2?").tolist()  # deterministic
    assert all(arr["reported"]["stand_in"] for arr in arrivals)
    assert header["import"]["text_stand_in"] == 2
    assert "stand-in tokenisation" in capsys.readouterr().err


def test_server_args_none_uses_defaults_and_says_so(tmp_path, capsys):
    reqs = [req([1, 2, 3], "a", 1.0)]
    rc, out = run_import(tmp_path, dump_doc(reqs, None))
    assert rc == 0
    header, _ = read_trace(out)
    assert header["import"]["config_from"].startswith("none")
    assert "device_tokens" in header["import"]["assumed"]
    assert header["scenario"]["cache"]["page_size"] == 1
    err = capsys.readouterr().err
    assert "server_args is None" in err and "assumed device_tokens" in err


@pytest.mark.parametrize("hicache", [True, False])
def test_hicache_configuration(tmp_path, capsys, hicache):
    sa = ServerArgs(page_size=16, max_total_tokens=16000, enable_hierarchical_cache=hicache,
                    hicache_ratio=3.0, hicache_write_policy="write_back",
                    hicache_storage_backend="file", hicache_storage_prefetch_policy="best_effort",
                    hicache_mem_layout="layer_first", hicache_io_backend="direct")
    rc, out = run_import(tmp_path, dump_doc([req([1] * 40, "a", 1.0)], sa))
    assert rc == 0
    header, _ = read_trace(out)
    c = header["scenario"]["cache"]
    assert c["hierarchical"] is hicache
    assert c["device_tokens"] == 16000 and c["host_tokens"] == 48000
    assert c["write_policy"] == "write_back" and c["host_layout"] == "layer_first"
    assert c["storage"] is hicache and c["prefetch_stop_policy"] == "best_effort"
    unmapped = header["import"]["unmapped"]
    assert unmapped["hicache_io_backend"]["value"] == "direct"
    assert "model_path" in header["import"]["ignored_arguments"]
    err = capsys.readouterr().err
    assert "not mapped hicache_io_backend = \"direct\"" in err


def test_flags_override_the_dump(tmp_path):
    sa = ServerArgs(page_size=4, max_total_tokens=4096, enable_hierarchical_cache=True)
    rc, out = run_import(tmp_path, dump_doc([req([1] * 8, "a", 1.0)], sa), "--page-size", "8",
                         "--device-tokens", "800", "--host-tokens", "1600", "--hierarchical",
                         "off", "--max-running", "3", "--chunk-tokens", "32")
    assert rc == 0
    header, _ = read_trace(out)
    c, s = header["scenario"]["cache"], header["scenario"]["scheduler"]
    assert (c["page_size"], c["device_tokens"], c["host_tokens"], c["hierarchical"]) == \
        (8, 800, 1600, False)
    assert (s["max_running"], s["chunk_tokens"]) == (3, 32)


def test_namespaces_from_extra_key_and_lora(tmp_path):
    reqs = [req([1, 2], "a", 1.0), req([1, 2], "b", 2.0, extra_key="tenant-1"),
            req([1, 2], "c", 3.0, lora_path="adapter-x"),
            req([1, 2], "d", 4.0, extra_key="tenant-1"),
            req([1, 2], "e", 5.0, lora_id=LoRARef(lora_id="7", lora_name="x"))]
    rc, out = run_import(tmp_path, dump_doc(reqs, ServerArgs()))
    assert rc == 0
    header, arrivals = read_trace(out)
    assert [a["ns"] for a in arrivals] == [0, 1, 2, 1, 3]
    assert header["import"]["namespaces"][0] == {"ns": 1, "extra_key": "tenant-1", "lora": None}


def test_directory_takes_every_dump_in_time_order_and_merges_duplicates(tmp_path):
    d = tmp_path / "crash" / "host-a"
    d.mkdir(parents=True)
    write_dump(str(d / "crash_dump_2.pkl"), dump_doc([req([3], "c", 30.0), req([2], "b", 20.0)],
                                                     ServerArgs(page_size=2)))
    unfinished_b = (GenerateReqInput(input_ids=[2], rid="b"), {"output_ids": [1]}, 20.0, 21.0)
    write_dump(str(d / "crash_dump_1.pkl"), dump_doc([req([1], "a", 10.0), unfinished_b],
                                                     ServerArgs(page_size=2)))
    out = tmp_path / "w.jsonl"
    assert imp.main([str(tmp_path / "crash"), "-o", str(out)]) == 0
    header, arrivals = read_trace(out)
    assert [a["reported"]["sglang_rid"] for a in arrivals] == ["a", "b", "c"]
    assert "abort_at" not in arrivals[1]  # the finished state of b wins
    assert header["import"]["duplicates"] == 1 and len(header["import"]["dumps"]) == 2
    assert "configuration" not in header["import"]["notes"]
    write_dump(str(d / "crash_dump_3.pkl"), dump_doc([req([4], "d", 40.0)], ServerArgs(page_size=8)))
    assert imp.main([str(tmp_path / "crash"), "-o", str(out)]) == 0
    header, _ = read_trace(out)
    assert header["scenario"]["cache"]["page_size"] == 8
    assert "crash_dump_3.pkl (the last read) are used" in header["import"]["notes"]["configuration"]


def test_old_protocols_and_numpy_ids(tmp_path):
    ids = SYSTEM[:10]
    for proto in (0, 2, 4, 5):
        rc, out = run_import(tmp_path, dump_doc([req(ids, "a", 1.0)], ServerArgs()),
                             protocol=proto, name="p%d.pkl" % proto)
        assert rc == 0, proto
        assert read_trace(out)[1][0]["prompt"] == ids
    # numpy arrays of ids, as numpy pickles them (decoded without numpy)
    for proto, frombuffer in ((2, False), (4, False), (5, True)):
        p = tmp_path / ("np%d.pkl" % proto)
        write_numpy_dump(str(p), dump_doc([req(NumpyIds(ids, frombuffer), "a", 1.0)],
                                          ServerArgs()), proto)
        out = tmp_path / "np.jsonl"
        assert imp.main([str(p), "-o", str(out)]) == 0, proto
        assert read_trace(out)[1][0]["prompt"] == ids


# --- bad and hostile input ----------------------------------------------------------------


class Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def test_os_system_by_reduce_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    doc = dump_doc([req([1, 2], "a", 1.0)], ServerArgs())
    doc["requests"][0][0].sampling_params = {"x": Evil("touch %s" % marker)}
    path = tmp_path / "evil.pkl"
    write_dump(str(path), doc)
    rc, text = run_cli(str(path), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2
    assert "global 'posix.system' is not allowed" in text
    assert not marker.exists()
    assert not (tmp_path / "w.jsonl").exists()


# (A global under sglang.* is read as inert data instead: test_import_sglang_hostile.py.)
@pytest.mark.parametrize("module,name", [("subprocess", "Popen"), ("builtins", "eval"),
                                         ("builtins", "getattr"), ("sglangx.srt", "x"),
                                         ("torch._utils", "_rebuild_tensor_v2")])
def test_globals_outside_the_allow_list_are_refused_by_name(tmp_path, module, name):
    blob = b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n)R."
    p = tmp_path / "g.pkl"
    p.write_bytes(blob)
    rc, text = run_cli(str(p), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2
    assert "global '%s.%s' is not allowed" % (module, name) in text
    if module.startswith("torch"):
        assert "torch tensors are not read" in text


def test_the_allow_list_is_exactly_the_dump_classes():
    modules = {m for m, _ in imp.ALLOWED}
    assert modules <= {"sglang.srt.managers.io_struct", "sglang.srt.server_args",
                       "sglang.srt.lora.lora_registry", "copyreg", "copy_reg", "datetime",
                       "builtins", "__builtin__", "collections", "http", "_codecs",
                       *imp._NUMPY_MODULES}
    # nothing the allow-list returns is a real callable from outside this module that could
    # execute code: builtins are data constructors only
    for (m, n), target in imp.ALLOWED.items():
        if m in ("builtins", "__builtin__"):
            assert n in ("set", "frozenset", "complex", "bytearray", "bytes", "object"), n


def test_empty_bytes_of_protocol_2_import_and_bytes_n_is_refused(tmp_path):
    doc = dump_doc([req([1, 2], "a", 1.0)], ServerArgs())
    doc["requests"][0][0].sampling_params = {"stop": b""}
    rc, out = run_import(tmp_path, doc, protocol=2)
    assert rc == 0
    blob = b"\x80\x02c__builtin__\nbytes\nJ\x00\x00\x00\x40\x85R."  # bytes(2**30)
    (tmp_path / "n.pkl").write_bytes(blob)
    rc, text = run_cli(str(tmp_path / "n.pkl"), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2 and "builtins.bytes is allowed without arguments only" in text


def test_truncated_dumps_are_clear_errors_at_every_cut(tmp_path):
    path = tmp_path / "full.pkl"
    write_dump(str(path), dump_doc([req(SYSTEM, "a", 1.0), req(SYSTEM, "b", 2.0)],
                                   ServerArgs()))
    data = path.read_bytes()
    for cut in sorted({1, 2, 10, len(data) // 3, len(data) // 2, len(data) - 1}):
        p = tmp_path / ("cut%d.pkl" % cut)
        p.write_bytes(data[:cut])
        rc = imp.main([str(p), "-o", str(tmp_path / "w.jsonl")])
        assert rc == 2, cut
    rc, text = run_cli(str(tmp_path / ("cut%d.pkl" % (len(data) // 2))), "-o",
                       str(tmp_path / "w.jsonl"))
    assert rc == 2 and "truncated pickle" in text
    (tmp_path / "empty.pkl").write_bytes(b"")
    rc, text = run_cli(str(tmp_path / "empty.pkl"))
    assert rc == 2 and "empty file" in text


def test_deep_nesting_is_refused_or_skipped_without_a_crash(tmp_path):
    depth = 200_000
    nested = b"]" * depth + b"a" * (depth - 1)  # a list nested 200,000 deep
    top = tmp_path / "deep_top.pkl"
    top.write_bytes(b"\x80\x02" + nested + b".")
    rc, text = run_cli(str(top), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2 and "expected a dict" in text
    # deep in a request's input_ids and in a server argument
    blob = (b"\x80\x02}(X\x08\x00\x00\x00requests]((csglang.srt.managers.io_struct\n"
            b"GenerateReqInput\n)\x81}X\t\x00\x00\x00input_ids" + nested +
            b"sb}G?\xf0\x00\x00\x00\x00\x00\x00G@\x00\x00\x00\x00\x00\x00\x00teu.")
    p = tmp_path / "deep_ids.pkl"
    p.write_bytes(blob)
    rc, text = run_cli(str(p), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2
    assert "request 0: field input_ids: is a batch" in text and "no importable requests" in text


def test_a_million_requests_are_refused_by_the_limit(tmp_path):
    one = req([1, 2, 3], "a", 1.0)
    path = tmp_path / "many.pkl"
    write_dump(str(path), dump_doc([one] * 1_000_000, ServerArgs()))  # pickle memoizes: small
    rc, text = run_cli(str(path), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2
    assert "1000000 requests is more than --max-requests 500000" in text


def test_request_without_prompt_is_a_counted_skip_or_a_strict_error(tmp_path, capsys):
    reqs = [req([1, 2], "a", 1.0),
            (GenerateReqInput(rid="empty"), finished_out(0, 1, 0), 2.0, 3.0)]
    rc, out = run_import(tmp_path, dump_doc(reqs, ServerArgs()))
    assert rc == 0
    header, arrivals = read_trace(out)
    assert len(arrivals) == 1 and header["import"]["skipped"] == 1
    assert "request 1: field input_ids: the request has neither input_ids nor text" in \
        capsys.readouterr().err
    rc, _ = run_import(tmp_path, dump_doc(reqs, ServerArgs()), "--strict")
    assert rc == 2
    assert "request 1: field input_ids: the request has neither" in capsys.readouterr().err


@pytest.mark.parametrize("entry,message", [
    (("only", "three", 1.0), "request 0: expected (GenerateReqInput, out_dict, created_time, "
                             "finished_time), got tuple of 3"),
    ((GenerateReqInput(input_ids=[1, -5]), {}, 1.0, 2.0),
     "request 0: field input_ids: element 1: token id -5 is out of range"),
    ((GenerateReqInput(input_ids=[1, "x"]), {}, 1.0, 2.0),
     "request 0: field input_ids: element 1 is str, not a token id"),
    ((GenerateReqInput(input_ids=[1] * 100), {}, 1.0, 2.0),
     "request 0: field input_ids: 100 tokens is more than --max-prompt-tokens 50"),
    ((GenerateReqInput(input_ids=[1]), {}, float("nan"), 2.0),
     "request 0: field created_time: expected a time"),
    ((GenerateReqInput(input_ids=[1]), {"meta_info": {"completion_tokens": -1}}, 1.0, 2.0),
     "request 0: field meta_info.completion_tokens: -1 is out of range"),
    (({"input_ids": [1]}, {}, 1.0, 2.0), "request 0: field obj: expected a GenerateReqInput"),
])
def test_bad_requests_name_the_index_and_field(tmp_path, capsys, entry, message):
    rc, _ = run_import(tmp_path, dump_doc([entry], ServerArgs()), "--max-prompt-tokens", "50",
                       "--strict")
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("doc,message", [
    ([1, 2], "expected a dict with server_args and requests, got list"),
    ({"server_args": None}, "field requests: missing"),
    ({"requests": {"a": 1}}, "field requests: expected a list, got dict"),
    ({"requests": [], "server_args": 5}, "field server_args: expected a ServerArgs or None"),
])
def test_unexpected_top_level_shapes(tmp_path, capsys, doc, message):
    rc, _ = run_import(tmp_path, doc)
    assert rc == 2
    assert message in capsys.readouterr().err


def test_missing_file_and_bad_flags(tmp_path):
    rc, text = run_cli(str(tmp_path / "nope.pkl"))
    assert rc == 2 and "nope.pkl: cannot open file" in text
    # A flag value out of range is the command line's 105 (docs/cli.md), as kvsim's own flags.
    rc, text = run_cli(str(tmp_path / "nope.pkl"), "--page-size", "0")
    assert rc == 105 and "--page-size: must be at least 1" in text


def test_malformed_flags_exit_with_the_command_lines_codes(tmp_path):
    """docs/cli.md: 109 an unknown flag, 106 a missing argument, 105 a bad flag value."""
    rc, text = run_cli(str(tmp_path / "x.pkl"), "--no-such-flag")
    assert rc == 109 and "unrecognized arguments: --no-such-flag" in text
    rc, text = run_cli()
    assert rc == 106 and "required" in text
    rc, text = run_cli(str(tmp_path / "x.pkl"), "--page-size", "abc")
    assert rc == 105 and "--page-size" in text


# --- the int-batch compaction ahead of unpickling -----------------------------------------


def _expand(v):
    """Everything the importer reads, with packed batches expanded as plain() does."""
    v = imp.plain(v)
    if isinstance(v, list):
        return [_expand(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_expand(x) for x in v)
    if isinstance(v, dict):
        return {k: _expand(x) for k, x in v.items()}
    if isinstance(v, imp.Record):
        return (type(v).__name__, _expand(v.fields))
    return v


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_compaction_reads_the_same_data_as_plain_unpickling(protocol):
    tricky = "text with opcode-like bytes ](" + "Ka" * 40 + "e and " + "J\x00\x00\x00\x00" * 20
    ids = list(range(60000, 70000)) + [5, 300, 2**31 - 1]  # BININT2, BININT1, BININT, 10^4 long
    doc = dump_doc([
        req(ids, "a", 1.0),
        (GenerateReqInput(input_ids=[1, 2, 3] * 20 + ["x"] + [4] * 30, text=tricky, rid="b"),
         {"output_ids": [-1] * 40 + [2**40] * 20, "meta_info": {"k": [1.5] * 30}}, 2.0, 3.0),
        req(ids, "c", 3.0),  # the same token values in a second list
    ], ServerArgs(page_size=4))
    data = pickle.dumps(doc, protocol=protocol)
    packed = imp.compact_int_runs(data, "kvsim_packed_test")
    assert packed is not None and len(packed) < len(data) + 4096
    u = imp.RestrictedUnpickler(__import__("io").BytesIO(packed))
    u.packed_module = "kvsim_packed_test"
    got = u.load()
    want = imp.RestrictedUnpickler(__import__("io").BytesIO(data)).load()
    assert _expand(got) == _expand(want)
    assert type(got["requests"][0][0].fields["input_ids"][0]) is imp.PackedInts


def test_compaction_gives_up_on_what_it_cannot_walk():
    data = pickle.dumps({"requests": [1, 2]}, protocol=4)
    assert imp.compact_int_runs(data[:-3], "m") is None  # truncated
    assert imp.compact_int_runs(b"\x80\x02\xff.", "m") is None  # unknown opcode
    assert imp.compact_int_runs(b"\x80\x02\x8b\xff\xff\xff\xff.", "m") is None  # LONG4 < 0


def test_a_file_cannot_name_the_packed_global(tmp_path):
    p = tmp_path / "forged.pkl"
    p.write_bytes(b"\x80\x02ckvsim_packed_0000000000000000\nids\nC\x02K\x01\x85R.")
    rc, text = run_cli(str(p), "-o", str(tmp_path / "w.jsonl"))
    assert rc == 2 and "global 'kvsim_packed_0000000000000000.ids' is not allowed" in text


def test_total_token_limit_stops_a_memo_amplified_dump_early(tmp_path):
    big = list(range(1000, 1000 + 20_000))
    reqs = [req(big, "r%d" % i, float(i)) for i in range(200)]  # one list object, 200 times
    rc, text = run_cli(str(_write(tmp_path, dump_doc(reqs, ServerArgs()))), "-o",
                       str(tmp_path / "w.jsonl"), "--max-total-tokens", "1000000")
    assert rc == 2
    assert "request 50: the prompts so far hold 1020000 tokens, more than --max-total-tokens" \
        in text


def _write(tmp_path, doc):
    path = tmp_path / "d.pkl"
    write_dump(str(path), doc)
    return path


def test_odd_strings_stay_valid_utf8(tmp_path):
    reqs = [req([1, 2], "bad\ud800rid", 1.0, extra_key="tenant\udfff" + "x" * 500)]
    rc, out = run_import(tmp_path, dump_doc(reqs, ServerArgs()))
    assert rc == 0
    text = out.read_text(encoding="utf-8")  # strict: no lone surrogates, even escaped
    assert "\\ud800" not in text and "\\udfff" not in text
    header, arrivals = read_trace(out)
    assert arrivals[0]["reported"]["sglang_rid"] == "bad?rid"
    assert len(header["import"]["namespaces"][0]["extra_key"]) == 200
