"""kvsim import-sglang on dumps pickled with SGLang's REAL classes (issue 29): for every revision
in ../shared/sglang, GenerateReqInput and ServerArgs (constructed, so filled as its
__post_init__ fills it: cuda_graph_config and the rest) are loaded from SGLang's own source
through kvsim.sglang_target, a dump of the shape tokenizer_manager writes is pickled, and the
importer (in its own process, SGLang not importable there) turns it into a workload trace."""

import dataclasses
import json
import os
import pickle
import subprocess
import sys

import pytest

from sglang_src import bundle_tags, sglang_checkout, target

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kvsim",
                      "import_sglang.py")


def real_dump(tag):
    """(pickled dump, the ServerArgs fields it holds) with SGLang's classes of `tag`."""
    target.load_sglang(sglang_checkout(tag))
    try:
        server_args = sys.modules["sglang.srt.server_args"]
        io_struct = sys.modules["sglang.srt.managers.io_struct"]
        # __post_init__ asks sglang.srt.utils.runai_utils.is_runai_obj_uri(model_path), which
        # kvsim.sglang_target has no stand-in for (SGLang's answers False for a path that is not
        # "runai://..."): answered here, for this test only.
        if "is_runai_obj_uri" in vars(server_args):
            server_args.is_runai_obj_uri = lambda uri: str(uri).startswith("runai://")
        sa = server_args.ServerArgs(model_path="dummy", page_size=16,
                                    enable_hierarchical_cache=True, hicache_ratio=3.0)
        reqs = []
        for i, t in enumerate((100.0, 100.5, 101.0)):
            obj = io_struct.GenerateReqInput(input_ids=list(range(1000, 1064)) + [i] * 8,
                                             sampling_params={"max_new_tokens": 4}, rid="r%d" % i)
            out = {"text": "x", "output_ids": [1, 2, 3],
                   "meta_info": {"finish_reason": {"type": "stop"}, "prompt_tokens": 72,
                                 "completion_tokens": 3, "cached_tokens": 64 if i else 0}}
            reqs.append((obj, out, t, t + 1.0))
        doc = {"server_args": sa, "config_updates": [], "resolved_config": None,
               "requests": reqs, "launch_command": "python -m sglang.launch_server"}
        fields = {f.name: getattr(sa, f.name) for f in dataclasses.fields(sa)}
        fields.update(vars(sa))
        return pickle.dumps(doc), fields
    finally:
        target.unload()


@pytest.mark.parametrize("tag", bundle_tags())
def test_a_dump_of_the_real_classes_imports(tmp_path, tag):
    blob, fields = real_dump(tag)
    path = tmp_path / "crash_dump.pkl"
    path.write_bytes(blob)
    out = tmp_path / "w.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no sglang, no kvsim
    p = subprocess.run([sys.executable, SCRIPT, str(path), "-o", str(out)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == (
        "%s: 3 requests imported from 1 dump(s) (3 finished, 0 unfinished, 0 aborted); "
        "0 skipped, 0 duplicates merged" % out)
    header = json.loads(out.read_text().splitlines()[0])
    cache = header["scenario"]["cache"]
    assert cache["page_size"] == 16 and cache["hierarchical"] is True
    assert cache["host_tokens"] == 3 * cache["device_tokens"]
    assert header["import"]["config_from"] == "server_args"
    # A class ServerArgs holds that the importer does not model (CudaGraphConfig where the
    # revision has it) is named in a note, read as data, and costs nothing else.
    notes = header["import"]["notes"]
    cgc = fields.get("cuda_graph_config")
    if cgc is not None and type(cgc).__module__.startswith("sglang."):
        assert "%s.%s" % (type(cgc).__module__, type(cgc).__qualname__) in \
            notes["sglang_classes"]
