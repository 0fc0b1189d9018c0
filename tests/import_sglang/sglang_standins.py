"""Stand-ins for the SGLang classes a crash or request dump pickles, under SGLang's own module and
class names, so the tests can write dumps of the exact shape SGLang writes without SGLang.

Field names follow SGLang's dataclasses (python/sglang/srt/managers/io_struct.py GenerateReqInput,
python/sglang/srt/server_args.py ServerArgs, snapshot of 2026-08); only the fields the importer
reads or that commonly carry values are declared, and every other field pickles as SGLang's do
(dataclass __dict__ state). Nothing here is SGLang's code.
"""

import dataclasses
import pickle
import sys
import types
from typing import Any, Dict, List, Optional


def _module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sub = ".".join(parts[:i])
        if sub not in sys.modules:
            sys.modules[sub] = types.ModuleType(sub)
    return sys.modules[name]


@dataclasses.dataclass
class GenerateReqInput:
    text: Optional[Any] = None
    input_ids: Optional[Any] = None
    input_embeds: Optional[Any] = None
    image_data: Optional[Any] = None
    sampling_params: Optional[Dict[str, Any]] = None
    return_logprob: Optional[bool] = None
    stream: bool = False
    log_metrics: bool = True
    lora_path: Optional[Any] = None
    lora_id: Optional[Any] = None
    extra_key: Optional[Any] = None
    received_time: Optional[float] = None
    rid: Optional[Any] = dataclasses.field(default=None, kw_only=True)
    session_id: Optional[str] = dataclasses.field(default=None, kw_only=True)
    http_worker_ipc: Optional[str] = dataclasses.field(default=None, kw_only=True)


@dataclasses.dataclass
class ServerArgs:
    model_path: str = "stand-in/model"
    page_size: Optional[int] = None
    mem_fraction_static: Optional[float] = None
    max_running_requests: Optional[int] = None
    max_total_tokens: Optional[int] = None
    chunked_prefill_size: Optional[int] = None
    max_prefill_tokens: int = 16384
    schedule_policy: str = "fcfs"
    radix_eviction_policy: str = "lru"
    disable_radix_cache: bool = False
    enable_cache_report: bool = False
    crash_dump_folder: Optional[str] = None
    tp_size: int = 1
    enable_hierarchical_cache: bool = False
    hicache_ratio: float = 2.0
    hicache_size: int = 0
    hicache_write_policy: str = "write_through"
    hicache_io_backend: str = "kernel"
    hicache_mem_layout: str = "page_first"
    hicache_storage_backend: Optional[str] = None
    hicache_storage_prefetch_policy: str = "timeout"
    lora_paths: Optional[Any] = None


@dataclasses.dataclass
class LoRARef:
    lora_id: Optional[str] = None
    lora_name: Optional[str] = None
    lora_path: Optional[str] = None
    pinned: Optional[bool] = None


for _cls, _mod in ((GenerateReqInput, "sglang.srt.managers.io_struct"),
                   (ServerArgs, "sglang.srt.server_args"),
                   (LoRARef, "sglang.srt.lora.lora_registry")):
    _cls.__module__ = _mod
    _cls.__qualname__ = _cls.__name__
    setattr(_module(_mod), _cls.__name__, _cls)


def finished_out(prompt_tokens, completion, cached, details=None, finish="stop"):
    meta = {"id": "x", "finish_reason": {"type": finish, "matched": None} if finish else None,
            "prompt_tokens": prompt_tokens, "weight_version": "default", "num_retractions": 0,
            "reasoning_tokens": 0, "completion_tokens": completion, "cached_tokens": cached}
    if details is not None:
        meta["cached_tokens_details"] = details
    return {"text": "out", "output_ids": list(range(completion)), "meta_info": meta}


def dump_doc(requests, server_args=None, crash=True):
    """The dict tokenizer_manager pickles: resolved_config is asdict(server_args) (None when
    server_args is None)."""
    doc = {"server_args": server_args, "config_updates": [],
           "resolved_config": dataclasses.asdict(server_args) if server_args else None,
           "requests": requests}
    if crash:
        doc["launch_command"] = "python -m sglang.launch_server --crash-dump-folder /tmp/d"
    return doc


def write_dump(path, doc, protocol=pickle.DEFAULT_PROTOCOL):
    with open(path, "wb") as f:
        pickle.dump(doc, f, protocol=protocol)


# numpy arrays of ids, pickled the way numpy pickles them (ndarray.__reduce__ and, from protocol
# 5, __reduce_ex__ with _frombuffer), by stand-ins installed under numpy's names only while a
# dump is written.
class _Dtype:
    def __init__(self, spec):
        self.spec = spec

    def __reduce__(self):
        return (_Dtype, (self.spec, False, True), (3, "<", None, None, None, -1, -1, 0))


class _NdarrayType:
    pass


def _reconstruct(subtype, shape, typecode):
    raise AssertionError("stand-in: never called")


def _frombuffer(buf, dtype, shape, order):
    raise AssertionError("stand-in: never called")


class NumpyIds:
    """Pickles as numpy.ndarray of int64 `ids` would."""

    def __init__(self, ids, use_frombuffer=False):
        self.raw = b"".join(int(t).to_bytes(8, "little", signed=True) for t in ids)
        self.n = len(ids)
        self.use_frombuffer = use_frombuffer

    def __reduce_ex__(self, protocol):
        if self.use_frombuffer and protocol >= 5:
            return (_frombuffer, (pickle.PickleBuffer(bytearray(self.raw)), _Dtype("<i8"),
                                  (self.n,), "C"))
        return (_reconstruct, (_NdarrayType, (0,), b"b"),
                (1, (self.n,), _Dtype("i8"), False, self.raw))


def write_numpy_dump(path, doc, protocol):
    names = {"numpy": [("dtype", _Dtype), ("ndarray", _NdarrayType)],
             "numpy.core.multiarray": [("_reconstruct", _reconstruct)],
             "numpy.core.numeric": [("_frombuffer", _frombuffer)]}
    saved = {m: sys.modules.get(m) for m in ("numpy", "numpy.core", *names)}
    try:
        for m in saved:
            sys.modules[m] = types.ModuleType(m)
        for m, items in names.items():
            for name, obj in items:
                obj.__module__, obj.__qualname__ = m, name
                setattr(sys.modules[m], name, obj)
        write_dump(path, doc, protocol)
    finally:
        for m, old in saved.items():
            if old is None:
                sys.modules.pop(m, None)
            else:
                sys.modules[m] = old
