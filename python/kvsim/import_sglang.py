#!/usr/bin/python3
"""kvsim import-sglang: SGLang crash and request dumps -> a kvsim workload trace.

Run as `kvsim import-sglang ...` (the binary runs this file as a script), as
`python -m kvsim.import_sglang ...`, or as `python3 import_sglang.py ...`.

SGLang writes two kinds of pickle (python/sglang/srt/managers/tokenizer_manager.py):
  --crash-dump-folder DIR      DIR/<host>/crash_dump_<time>.pkl when the server dies
  --dump-requests-folder DIR   DIR/<time>.pkl every --dump-requests-threshold requests
Both hold {"server_args", "config_updates", "resolved_config", "requests"[, "launch_command"]}
where requests is a list of (GenerateReqInput, out_dict, created_time, finished_time).

A pickle is a program. This reader never imports or calls anything the file names: a
restricted Unpickler builds SGLang's dataclasses, numpy arrays and the few builtins these dumps
hold as plain data (stand-in classes and decoders defined here), and refuses every other global
by name. Only the Python standard library is used (Debian's python3).

Exit codes follow kvsim's: 0 imported, 2 bad input or bad flags.
"""

import os
import sys

# Run as a script, this file's folder (the kvsim package) heads sys.path: its modules must not
# shadow the standard library's.
if __name__ == "__main__" and sys.path and sys.path[0] and os.path.isdir(sys.path[0]) and \
        os.path.samefile(sys.path[0], os.path.dirname(os.path.abspath(__file__))):
    del sys.path[0]

import argparse
import array
import datetime
import gc
import io
import json
import math
import pickle
import re
import reprlib

EXIT_BAD_INPUT = 2

# Values from the dump are shown through this: a bounded repr (depth, items, length), so a value
# that shares sub-objects (a DAG 60 levels deep is 2 KB of pickle and 2^60 leaves as a tree) is
# never formatted or walked whole.
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 80, 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 6


def short(v):
    return _REPR.repr(v)


def text(s):
    """A string JSON readers accept: lone surrogates (a file name that is not UTF-8, a string in
    the dump) spelt as escapes instead of written as invalid UTF-8."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def shown_path(path):
    return text(path) if isinstance(path, str) else text(os.fsdecode(path))

# ---------------------------------------------------------------------------------------------
# Restricted unpickling


class ImportFailure(Exception):
    """Bad input: the message names the file and, where it can, the request index and field."""


class Record:
    """A dataclass instance from the dump, rebuilt as plain data (its field dict)."""

    __slots__ = ("fields",)
    sglang_name = "Record"

    def __new__(cls, *args, **kwargs):  # NEWOBJ / NEWOBJ_EX pass the class's own arguments
        obj = object.__new__(cls)
        obj.fields = {}
        return obj

    def __init__(self, *args, **kwargs):
        if args or kwargs:  # REDUCE(cls, args): an enum member, a namedtuple, ...
            self.fields = {"_args": list(args), **{str(k): v for k, v in kwargs.items()}}

    def __setstate__(self, state):
        # A dataclass pickles its __dict__; with __slots__ the state is (dict or None, slots).
        if isinstance(state, tuple) and len(state) == 2:
            d, slots = state
            merged = {}
            for part in (d, slots):
                if part is None:
                    continue
                if not isinstance(part, dict):
                    raise pickle.UnpicklingError(
                        "%s: state is not a field dictionary" % self.sglang_name)
                merged.update(part)
            state = merged
        if not isinstance(state, dict):
            raise pickle.UnpicklingError("%s: state is not a field dictionary" % self.sglang_name)
        self.fields = state

    def get(self, name, default=None):
        return self.fields.get(name, default)


class InertRecord(Record):
    """An SGLang class the importer does not know (e.g. a config dataclass a newer SGLang added
    to ServerArgs): its state is kept as data, whatever shape it has; nothing is called."""

    __slots__ = ()

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.fields = state
        elif isinstance(state, tuple) and len(state) == 2 and all(
                part is None or isinstance(part, dict) for part in state):
            super().__setstate__(state)
        else:
            self.fields = {"_state": state}


def _record_class(module, name, base=Record):
    return type(name, (base,), {"__slots__": (), "sglang_name": module + "." + name})


# sglang.<identifiers>: the classes read as inert records when the allow-list does not name them.
_SGLANG_GLOBAL = re.compile(r"sglang(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


GenerateReqInput = _record_class("sglang.srt.managers.io_struct", "GenerateReqInput")
EmbeddingReqInput = _record_class("sglang.srt.managers.io_struct", "EmbeddingReqInput")
ServerArgs = _record_class("sglang.srt.server_args", "ServerArgs")
LoRARef = _record_class("sglang.srt.lora.lora_registry", "LoRARef")
REQUEST_CLASSES = (GenerateReqInput, EmbeddingReqInput)


def _safe_reconstructor(cls, base, state):
    # copyreg._reconstructor, as protocols 0 and 1 pickle a plain class: only for our records.
    if not (isinstance(cls, type) and issubclass(cls, Record)) or base is not object:
        raise pickle.UnpicklingError("copyreg._reconstructor is allowed for SGLang records only")
    if state is not None:
        raise pickle.UnpicklingError("copyreg._reconstructor with a base state is not supported")
    return cls.__new__(cls)


# numpy arrays of ids, decoded from their pickled bytes without numpy.
_NP_KINDS = {  # (kind, itemsize) -> array typecode
    ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
    ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
    ("f", 4): "f", ("f", 8): "d", ("b", 1): "B",
}
for _code, _size in (("h", 2), ("i", 4), ("q", 8), ("f", 4), ("d", 8)):
    assert array.array(_code).itemsize == _size


class NpDtype:
    __slots__ = ("kind", "size", "order")

    def __init__(self, spec):
        if not isinstance(spec, str) or len(spec) < 2:
            raise pickle.UnpicklingError("numpy dtype %s is not a plain number type" % (short(spec),))
        spec = spec.lstrip("<>=|")
        kind, size = spec[0], spec[1:]
        if not size.isdigit() or (kind, int(size)) not in _NP_KINDS:
            raise pickle.UnpicklingError("numpy dtype %r is not an integer or float type" % spec)
        self.kind, self.size, self.order = kind, int(size), "<"

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "="):
            self.order = ">" if state[1] == ">" else "<"

    def decode(self, raw):
        if not isinstance(raw, (bytes, bytearray)):
            raise pickle.UnpicklingError("numpy array data is not bytes")
        if len(raw) % self.size:
            raise pickle.UnpicklingError("numpy array data is not a whole number of items")
        a = array.array(_NP_KINDS[(self.kind, self.size)])
        a.frombytes(bytes(raw))
        if (self.order == ">") != (sys.byteorder == "big") and self.size > 1:
            a.byteswap()
        return a.tolist()


def _np_dtype(spec, align=False, copy=True):
    return NpDtype(spec)


def _shape(shape):
    if not isinstance(shape, tuple) or len(shape) > 2 or not all(
            isinstance(n, int) and 0 <= n < 1 << 31 for n in shape):
        raise pickle.UnpicklingError(
            "numpy array shape %s is not 1- or 2-dimensional" % (short(shape),))
    return shape


def _reshape(flat, shape):
    total = 1
    for n in shape:
        total *= n
    if len(flat) != total:
        raise pickle.UnpicklingError("numpy array data does not match its shape %r" % (shape,))
    if len(shape) == 2:
        return [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
    if len(shape) == 0:
        return flat[0]
    return flat


class NpArray:
    """numpy.core.multiarray._reconstruct(ndarray, shape, b) then BUILD with the array state."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = None

    def __setstate__(self, state):
        if not isinstance(state, tuple) or len(state) != 5:
            raise pickle.UnpicklingError("numpy array state has an unexpected shape")
        _version, shape, dtype, fortran, raw = state
        if not isinstance(dtype, NpDtype) or fortran:
            raise pickle.UnpicklingError("numpy array is not a C-ordered integer/float array")
        self.value = _reshape(dtype.decode(raw), _shape(shape))


def _np_reconstruct(subtype, shape, typecode):
    if subtype is not NpArray:
        raise pickle.UnpicklingError("numpy _reconstruct of something other than ndarray")
    return NpArray()


def _np_frombuffer(buf, dtype, shape, order):
    if isinstance(buf, pickle.PickleBuffer):
        buf = bytes(buf)
    if not isinstance(dtype, NpDtype) or order not in ("C", "A"):
        raise pickle.UnpicklingError("numpy array is not a C-ordered integer/float array")
    holder = NpArray()
    holder.value = _reshape(dtype.decode(buf), _shape(shape))
    return holder


def _np_scalar(dtype, raw=b""):
    if not isinstance(dtype, NpDtype):
        raise pickle.UnpicklingError("numpy scalar of an unsupported type")
    return dtype.decode(raw)[0]


def _latin1_bytes(text, encoding="latin1"):
    # Protocols 0-2 write a bytes object as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed for latin-1 bytes only")
    return text.encode("latin-1")


def _empty_bytes(*args):
    # Protocols 0-2 write b"" as builtins.bytes(): allowed with no argument only (bytes(n) would
    # allocate what the file asks).
    if args:
        raise pickle.UnpicklingError("builtins.bytes is allowed without arguments only")
    return b""


def _http_status(code):
    if not isinstance(code, int):
        raise pickle.UnpicklingError("http.HTTPStatus of a non-integer")
    return code


_NUMPY_MODULES = ("numpy", "numpy.core.multiarray", "numpy._core.multiarray",
                  "numpy.core.numeric", "numpy._core.numeric")

ALLOWED = {
    ("sglang.srt.managers.io_struct", "GenerateReqInput"): GenerateReqInput,
    ("sglang.srt.managers.io_struct", "EmbeddingReqInput"): EmbeddingReqInput,
    ("sglang.srt.server_args", "ServerArgs"): ServerArgs,
    ("sglang.srt.lora.lora_registry", "LoRARef"): LoRARef,
    ("copyreg", "_reconstructor"): _safe_reconstructor,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "time"): datetime.time,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "bytes"): _empty_bytes,
    ("collections", "OrderedDict"): dict,
    ("collections", "deque"): lambda iterable=(), maxlen=None: list(iterable),
    ("http", "HTTPStatus"): _http_status,
    ("_codecs", "encode"): _latin1_bytes,
    ("builtins", "object"): object,  # the base named by copyreg._reconstructor
}
# Protocols 0-2 written by Python 3 name builtins and copyreg by their Python 2 names.
for (_m, _n), _t in list(ALLOWED.items()):
    if _m in ("builtins", "copyreg"):
        ALLOWED[({"builtins": "__builtin__", "copyreg": "copy_reg"}[_m], _n)] = _t
for _m in _NUMPY_MODULES:
    ALLOWED[(_m, "_reconstruct")] = _np_reconstruct
    ALLOWED[(_m, "ndarray")] = NpArray
    ALLOWED[(_m, "dtype")] = _np_dtype
    ALLOWED[(_m, "scalar")] = _np_scalar
    ALLOWED[(_m, "_frombuffer")] = _np_frombuffer


class RestrictedUnpickler(pickle.Unpickler):
    packed_module = None  # set when the stream went through compact_int_runs

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inert = {}  # (module, name) -> InertRecord subclass, for the classes read so far

    def find_class(self, module, name):
        target = ALLOWED.get((module, name))
        if target is not None:
            return target
        if module == self.packed_module and name == "ids":
            return PackedInts
        if _SGLANG_GLOBAL.match(module) and _IDENTIFIER.match(name):
            # Another SGLang class: data we do not model, never code we run (the class is ours,
            # built here; the module is not imported).
            cls = self.inert.get((module, name))
            if cls is None:
                cls = self.inert[(module, name)] = _record_class(module, name, InertRecord)
            return cls
        if module.split(".")[0] == "torch":
            raise pickle.UnpicklingError(
                "global '%s.%s' is not allowed: torch tensors are not read (this reader imports "
                "nothing); dump the ids as lists" % (module, name))
        raise pickle.UnpicklingError(
            "global '%s.%s' is not allowed (the dump may only name SGLang's request and "
            "server-argument classes, numpy id arrays, datetime and plain builtins)" %
            (module, name))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids (torch.save format) are not supported")


# Memory: every token id the unpickler reads becomes its own Python int (~40 bytes with its list
# slot). Before unpickling, compact_int_runs walks the opcode stream and replaces each batch of
# integer opcodes that fills a list (MARK, BININT*, APPENDS: how pickle writes lists of ints in
# batches of 1000) by one PackedInts holding the batch's raw opcode bytes (~5 bytes per id);
# plain() expands them per list when a list is read. The walk understands every opcode's length;
# on anything it does not know, or a stream that ends early, it gives up and the original bytes
# are unpickled as they are (which then reports the problem). The replacement names a global
# only this run knows, so a file cannot forge one; its bytes are decoded by the same restricted
# Unpickler, and hold integer opcodes only.


class PackedInts:
    __slots__ = ("raw",)

    def __init__(self, raw):
        if not isinstance(raw, bytes):
            raise pickle.UnpicklingError("packed ids: not bytes")
        self.raw = raw

    def values(self):
        return RestrictedUnpickler(io.BytesIO(b"\x80\x02](" + self.raw + b"e.")).load()


_INT_OPS = rb"(?:K.|M..|J....)"
_INT_BATCH = re.compile(rb"\((" + _INT_OPS + rb"{16,})e", re.S)
# Opcodes of a fixed size, except FRAME and STOP, and a MARK that does not open an int batch.
_FIXED_RUN = re.compile(
    rb"(?:\((?!" + _INT_OPS + rb"{16,}e)|[)\]}012NQRabeldostu\x81\x85-\x89\x8f-\x94\x97\x98]"
    rb"|[Kqh\x80\x82].|[M\x83]..|[Jrj\x84]....|G.{8})+", re.S)
_LEN_PREFIXED = {0x8C: 1, ord("C"): 1, ord("U"): 1, 0x8A: 1, ord("X"): 4, ord("B"): 4,
                 ord("T"): 4, 0x8B: 4, 0x8D: 8, 0x8E: 8, 0x96: 8}
_LINES = {ord(c): 1 for c in "ILFSVPpg"}
_LINES.update({ord("c"): 2, ord("i"): 2})


def compact_int_runs(data, module):
    """The stream with its int batches packed, or None when it cannot be walked."""
    out, seg, pos, n = [], 0, 0, len(data)
    global_op = b"c" + module.encode() + b"\nids\n"
    while pos < n:
        m = _FIXED_RUN.match(data, pos)
        if m:
            pos = m.end()
            if pos >= n:
                return None
        op = data[pos]
        if op == 0x2E:  # STOP
            out.append(data[seg:pos + 1])
            return b"".join(out) if pos + 1 == n else None
        m = _INT_BATCH.match(data, pos)
        if m:
            raw = m.group(1)
            out.append(data[seg:pos])
            out.append(b"(" + global_op + b"B" + len(raw).to_bytes(4, "little") + raw + b"\x85Re")
            pos = seg = m.end()
            continue
        if op == 0x95:  # FRAME: dropped, the rewritten stream is unframed
            out.append(data[seg:pos])
            pos = seg = pos + 9
            continue
        width = _LEN_PREFIXED.get(op)
        if width is not None:
            length = int.from_bytes(data[pos + 1:pos + 1 + width], "little", signed=op == 0x8B)
            if length < 0:
                return None
            pos += 1 + width + length
            continue
        lines = _LINES.get(op)
        if lines is None:
            return None  # an opcode this walk does not know: unpickle the original
        pos += 1
        for _ in range(lines):
            pos = data.find(b"\n", pos)
            if pos < 0:
                return None
            pos += 1
    return None


def load_dump(path, max_bytes):
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise ImportFailure("%s: cannot open file (%s)" % (path, e.strerror or e))
    if size > max_bytes:
        raise ImportFailure("%s: %d bytes is larger than --max-file-mb allows" % (path, size))
    if size == 0:
        raise ImportFailure("%s: empty file (not a pickle)" % path)
    gc.disable()  # the load builds millions of objects and frees none: no cycles to find
    try:
        with open(path, "rb") as f:
            data = f.read()
        module = "kvsim_packed_%s" % os.urandom(8).hex()
        packed = compact_int_runs(data, module)
        unpickler = RestrictedUnpickler(io.BytesIO(packed if packed is not None else data))
        if packed is not None:
            unpickler.packed_module = module
        del data, packed
        doc = unpickler.load()
        return doc, sorted("%s.%s" % k for k in unpickler.inert)
    except OSError as e:
        raise ImportFailure("%s: cannot read file (%s)" % (path, e.strerror or e))
    except pickle.UnpicklingError as e:
        msg = str(e)
        if "truncated" in msg:
            raise ImportFailure("%s: truncated pickle (%s)" % (path, msg))
        raise ImportFailure("%s: refused: %s" % (path, msg))
    except EOFError:
        raise ImportFailure("%s: truncated pickle (ran out of input)" % path)
    except RecursionError:
        raise ImportFailure("%s: refused: nesting too deep" % path)
    except MemoryError:
        raise ImportFailure("%s: refused: out of memory while reading (absurd sizes?)" % path)
    except Exception as e:  # anything else the opcodes can raise on hostile bytes
        raise ImportFailure("%s: not a readable pickle (%s: %s)" % (path, type(e).__name__, e))
    finally:
        gc.enable()


# ---------------------------------------------------------------------------------------------
# Reading the dump's shape


class Skip(Exception):
    def __init__(self, field, problem):
        super().__init__(problem)
        self.field, self.problem = field, problem


def plain(v):
    """numpy holders to lists, packed int batches expanded; everything else as is."""
    if isinstance(v, NpArray):
        return v.value
    if type(v) is list and v and PackedInts in set(map(type, v)):
        out = []
        for x in v:
            if type(x) is PackedInts:
                out += x.values()
            else:
                out.append(x)
        return out
    return v


def as_token_ids(v, field, limit):
    v = plain(v)
    if isinstance(v, (tuple, array.array)):
        v = list(v)
    if not isinstance(v, list):
        raise Skip(field, "expected a list of token ids, got %s" % type(v).__name__)
    if v and isinstance(plain(v[0]), (list, tuple, NpArray)):
        raise Skip(field, "is a batch of %d prompts (batched requests are not imported)" % len(v))
    if len(v) > limit:
        raise Skip(field, "%d tokens is more than --max-prompt-tokens %d" % (len(v), limit))
    try:  # the common case, checked at C speed; kept as 4 bytes per id until written
        ids = array.array("i", v)
        if not ids or min(ids) >= 0:
            return ids
    except (TypeError, OverflowError):
        pass
    for i, t in enumerate(v):
        if isinstance(t, bool) or not isinstance(t, int):
            raise Skip(field, "element %d is %s, not a token id" % (i, type(t).__name__))
        if t < 0 or t > 0x7FFFFFFF:
            raise Skip(field, "element %d: token id %d is out of range 0..2^31-1" % (i, t))
    return array.array("i", v)


STANDIN_BYTES = 4  # one stand-in token per 4 UTF-8 bytes (roughly a BPE token of English)


def standin_tokens(text):
    """Deterministic stand-in tokenisation of a text prompt (the model's tokenizer is not here).

    One token per STANDIN_BYTES bytes of the UTF-8 text, each the 31-bit FNV-1a hash of its
    bytes: texts that share a prefix share the tokens of its whole chunks, as the real
    tokenisation would (up to the chunk boundary).
    """
    data = text.encode("utf-8", "surrogatepass")
    out = []
    for i in range(0, len(data), STANDIN_BYTES):
        h = 0x811C9DC5
        for b in data[i:i + STANDIN_BYTES]:
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
        out.append(h & 0x7FFFFFFF)
    return array.array("i", out)


def as_int(v, field, lo=0, hi=1 << 40):
    v = plain(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise Skip(field, "expected an integer, got %s" % type(v).__name__)
    if v < lo or v > hi:
        raise Skip(field, "%d is out of range %d..%d" % (v, lo, hi))
    return v


MAX_SECONDS = 1e11  # |created_time| beyond this (year ~5000) is not a time SGLang wrote


def as_time(v, field):
    v = plain(v)
    if isinstance(v, datetime.datetime):
        try:
            v = v.timestamp()
        except (OverflowError, ValueError, OSError) as e:  # datetime.min and its like
            raise Skip(field, "datetime %s has no timestamp (%s)" % (short(v), e))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Skip(field, "expected a time in seconds, got %r" % (type(v).__name__,))
    if not math.isfinite(v) or abs(v) > MAX_SECONDS:
        raise Skip(field, "expected a time in seconds since 1970 (|t| <= %g), got %s" %
                   (MAX_SECONDS, short(v)))
    return float(v)


def clean_str(v, limit=200):
    """A short, valid UTF-8 string for the trace (lone surrogates replaced)."""
    v = v[:limit] if isinstance(v, str) else short(v)
    return v[:limit].encode("utf-8", "replace").decode("utf-8")


def scalar_or_first(v):
    if isinstance(v, (list, tuple)):
        return v[0] if len(v) == 1 else v
    return v


class Request:
    __slots__ = ("index", "source", "rid", "created", "prompt", "standin", "output_len",
                 "abort_at", "ns_key", "reported", "state", "tick")


def read_request(entry, index, source, opts, seen_ids):
    if not isinstance(entry, (tuple, list)) or len(entry) != 4:
        shape = type(entry).__name__
        if isinstance(entry, (tuple, list)):
            shape += " of %d" % len(entry)
        raise Skip("", "expected (GenerateReqInput, out_dict, created_time, finished_time), got "
                   + shape)
    obj, out, created, _finished = entry
    if not isinstance(obj, REQUEST_CLASSES):
        raise Skip("obj", "expected a GenerateReqInput, got %s" % type(obj).__name__)
    r = Request()
    r.index, r.source = index, source
    rid = scalar_or_first(obj.get("rid"))
    r.rid = rid if isinstance(rid, str) else None
    r.created = as_time(created, "created_time")
    ids = obj.get("input_ids")
    text = obj.get("text")
    if ids is not None:
        # One array per distinct list object: a dump that references one list from many
        # requests (pickle's memo) must not multiply it.
        r.prompt = seen_ids.get(id(ids))
        if r.prompt is None:
            r.prompt = as_token_ids(ids, "input_ids", opts.max_prompt_tokens)
            seen_ids[id(ids)] = r.prompt
        r.standin = False
    elif text is not None:
        text = scalar_or_first(text)
        if not isinstance(text, str):
            raise Skip("text", "is a batch of %d prompts (batched requests are not imported)"
                       % len(text) if isinstance(text, list) else
                       "expected a string, got %s" % type(text).__name__)
        if len(text) > opts.max_prompt_tokens * STANDIN_BYTES:
            raise Skip("text", "%d characters is more than --max-prompt-tokens allows" % len(text))
        r.prompt = standin_tokens(text)
        r.standin = True
    else:
        raise Skip("input_ids", "the request has neither input_ids nor text")
    if not r.prompt:
        raise Skip("input_ids" if ids is not None else "text", "is empty")

    if not isinstance(out, dict):
        raise Skip("out_dict", "expected a dict, got %s" % type(out).__name__)
    meta = out.get("meta_info")
    if meta is not None and not isinstance(meta, dict):
        raise Skip("out_dict.meta_info", "expected a dict, got %s" % type(meta).__name__)
    meta = meta or {}
    finish = meta.get("finish_reason")
    if finish is not None and not isinstance(finish, dict):
        raise Skip("meta_info.finish_reason", "expected a dict or None")
    aborted = finish is not None and finish.get("type") == "abort"
    finished = finish is not None and not aborted
    if "completion_tokens" in meta:
        generated = as_int(meta["completion_tokens"], "meta_info.completion_tokens", 0, 1 << 24)
    elif "output_ids" in out:
        oids = plain(out["output_ids"])
        if not isinstance(oids, list):
            raise Skip("out_dict.output_ids", "expected a list")
        generated = len(oids)
    else:
        generated = 0
    if finished:
        r.state = "finished"
        r.output_len = max(1, generated)
        r.abort_at = None
    else:
        # Unfinished (the crash caught it) or aborted: replayed as an abort at its last state.
        r.state = "aborted" if aborted else "unfinished"
        r.abort_at = generated
        r.output_len = max(1, generated)

    extra_key = scalar_or_first(obj.get("extra_key"))
    lora = scalar_or_first(obj.get("lora_id")) or scalar_or_first(obj.get("lora_path"))
    if isinstance(lora, LoRARef):
        lora = lora.get("lora_name") or lora.get("lora_id")
    key = (None if extra_key is None else clean_str(extra_key),
           None if lora is None else clean_str(lora))
    r.ns_key = key if key != (None, None) else None

    rep = {}
    if "cached_tokens" in meta and meta["cached_tokens"] is not None:
        rep["cached_tokens"] = as_int(meta["cached_tokens"], "meta_info.cached_tokens")
        details = meta.get("cached_tokens_details")
        if isinstance(details, dict):
            for tier in ("device", "host", "storage"):
                if tier in details:
                    rep[tier] = as_int(details[tier], "meta_info.cached_tokens_details." + tier)
    if "prompt_tokens" in meta and meta["prompt_tokens"] is not None:
        rep["prompt_tokens"] = as_int(meta["prompt_tokens"], "meta_info.prompt_tokens")
    if r.rid is not None:
        rep["sglang_rid"] = clean_str(r.rid)
    if r.standin:
        rep["stand_in"] = True
    r.reported = rep
    return r


def argument_names(cfg, dropped):
    """The configuration's entries named by a string (an argument name); other keys (an int, a
    tuple: a dump's dict can mix key types) are counted in dropped and left out."""
    out = {}
    for k, v in cfg.items():
        if isinstance(k, str):
            out[k] = v
        else:
            dropped.append(short(k))
    return out


def dump_config(doc, path, dropped):
    """The server configuration the dump recorded: resolved_config, else server_args's fields."""
    resolved = doc.get("resolved_config")
    if isinstance(resolved, dict):
        return argument_names(resolved, dropped), "resolved_config"
    sa = doc.get("server_args")
    if isinstance(sa, ServerArgs):
        cfg = argument_names(sa.fields, dropped)
        updates = doc.get("config_updates") or []
        for update in updates if isinstance(updates, (list, tuple)) else []:
            if isinstance(update, (tuple, list)) and len(update) == 2 and isinstance(
                    update[1], dict):
                cfg.update(argument_names(update[1], dropped))
        return cfg, "server_args"
    if sa is not None and not isinstance(sa, ServerArgs):
        raise ImportFailure("%s: field server_args: expected a ServerArgs or None, got %s" %
                            (path, type(sa).__name__))
    return None, "none"


# ---------------------------------------------------------------------------------------------
# Mapping the configuration


# Arguments that shape the cache or the scheduler but have no kvsim counterpart: listed (with
# their values) on stderr and in the header. Every other argument is listed by name only.
RELEVANT_UNMAPPED = {
    "hicache_io_backend": "kvsim's copy streams do not model the transfer kernel",
    "hicache_size": "host pool in GB needs the model's bytes per token; the ratio is used",
    "hicache_storage_backend_extra_config": "storage backend specifics are not modelled",
    "mem_fraction_static": "the KV pool size it gives depends on the GPU and the model",
    "max_prefill_tokens": "kvsim's admission has no prefill-token budget",
    "schedule_policy": "kvsim admits first come, first served",
    "disable_radix_cache": "kvsim always caches prefixes",
    "kv_cache_dtype": "bytes per token are not simulated",
    "context_length": "not needed to replay",
    "tp_size": "one simulated instance", "dp_size": "one simulated instance",
    "pp_size": "one simulated instance",
    "disaggregation_mode": "import models the serving instance without PD transfer",
    "enable_lmcache": "LMCache is not modelled",
    "speculative_algorithm": "speculative decoding is not modelled",
    "enable_hisparse": "hierarchical sparse attention is not modelled",
    "hicache_storage_prefetch_threshold": "not recorded in kvsim's scenario",
}

MAPPED = {"page_size", "enable_hierarchical_cache", "hicache_ratio", "hicache_write_policy",
          "hicache_mem_layout", "hicache_storage_backend", "hicache_storage_prefetch_policy",
          "chunked_prefill_size", "max_running_requests", "max_total_tokens",
          "radix_eviction_policy"}


def round_page(n, page, up=True):
    return ((n + page - 1) // page if up else n // page) * page


def cfg_int(cfg, name, notes, lo=1, hi=1 << 40):
    v = cfg.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        notes[name] = "value %s is not an integer in %d..%d; ignored" % (short(v), lo, hi)
        return None
    return v


def build_scenario(cfg, cfg_source, requests, opts, notes, assumed):
    """kvsim's scenario from the dump's configuration, then the command line on top."""
    cfg = cfg or {}
    biggest = max(len(r.prompt) + r.output_len for r in requests)
    page = cfg_int(cfg, "page_size", notes, 1, 1 << 16) or 1
    if cfg.get("page_size") is None:
        assumed["page_size"] = "not recorded; SGLang's default 1"
    if opts.page_size:
        page = opts.page_size
    hier = bool(cfg.get("enable_hierarchical_cache", False))
    if "enable_hierarchical_cache" not in cfg:
        assumed["enable_hierarchical_cache"] = "not recorded; off"
    if opts.hierarchical is not None:
        hier = opts.hierarchical == "on"

    device = cfg_int(cfg, "max_total_tokens", notes)
    if device is None:
        total = sum(len(r.prompt) + r.output_len for r in requests)
        device = min(max(total, 4 * biggest, 65536), 1 << 24)
        assumed["device_tokens"] = (
            "the dump does not record the KV pool size (max_total_tokens unset): %d tokens, "
            "room for every request's tokens (use --device-tokens)" % device)
    if opts.device_tokens:
        device = opts.device_tokens
    device = round_page(max(device, page), page, up=False)

    ratio = cfg.get("hicache_ratio", 2.0)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1e6:
        notes["hicache_ratio"] = "value %s is not a positive number; 2.0 used" % (short(ratio),)
        ratio = 2.0
    if "hicache_ratio" not in cfg:
        assumed["hicache_ratio"] = "not recorded; SGLang's default 2.0"
    host = round_page(max(int(device * ratio), page), page)
    if opts.host_tokens:
        host = round_page(opts.host_tokens, page)

    cache = {"page_size": page, "hierarchical": hier, "layer_count": 1, "item_bytes": 8,
             "device_tokens": device, "host_tokens": host}
    wp = cfg.get("hicache_write_policy", "write_through")
    if wp in ("write_through", "write_through_selective", "write_back"):
        cache["write_policy"] = wp
    else:
        notes["hicache_write_policy"] = ("value %s has no kvsim counterpart; write_through" %
                                         (short(wp),))
    if opts.write_policy:
        cache["write_policy"] = opts.write_policy
    layout = cfg.get("hicache_mem_layout")
    if layout == "layer_first":
        cache["host_layout"] = "layer_first"
    elif layout is not None:
        cache["host_layout"] = "page_first"
        if layout != "page_first":
            notes["hicache_mem_layout"] = "value %s modelled as page_first" % (short(layout),)
    ev = cfg.get("radix_eviction_policy", "lru")
    if ev in ("lru", "lfu"):
        cache["eviction_policy"] = ev
    else:
        notes["radix_eviction_policy"] = "value %s has no kvsim counterpart; lru" % (short(ev),)
    backend = cfg.get("hicache_storage_backend")
    storage = backend is not None and hier
    if backend is not None:
        notes["hicache_storage_backend"] = (
            "%s: modelled by kvsim's in-memory storage tier" % (short(backend),) if hier else
            "%s: ignored, HiCache is off" % (short(backend),))
    if opts.storage is not None:
        storage = opts.storage == "on" and hier
    cache["storage"] = storage
    pp = cfg.get("hicache_storage_prefetch_policy", "timeout")
    if pp in ("best_effort", "wait_complete", "timeout"):
        cache["prefetch_stop_policy"] = pp
    else:
        notes["hicache_storage_prefetch_policy"] = ("value %s has no kvsim counterpart" %
                                                    (short(pp),))
    if opts.prefetch_policy:
        cache["prefetch_stop_policy"] = opts.prefetch_policy

    sched = {}
    chunk = cfg.get("chunked_prefill_size")
    if chunk is None:
        sched["chunk_tokens"] = 8192
        assumed["chunked_prefill_size"] = "not recorded (SGLang picks it by GPU): 8192"
    elif chunk == -1 or chunk == 0:
        sched["chunk_tokens"] = 1 << 30  # chunked prefill disabled
    else:
        sched["chunk_tokens"] = cfg_int(cfg, "chunked_prefill_size", notes) or 8192
    if opts.chunk_tokens:
        sched["chunk_tokens"] = opts.chunk_tokens
    running = cfg_int(cfg, "max_running_requests", notes, 1, 1 << 20)
    if running is None:
        running = 128
        assumed["max_running_requests"] = "not recorded (SGLang derives it from the pool): 128"
    sched["max_running"] = opts.max_running or running
    last = max(r.tick for r in requests)
    sched["liveness_ticks"] = 1 << 30
    sched["max_ticks"] = min(1 << 40, 2 * last + 10_000_000)

    unmapped_relevant = {}
    ignored = []
    for name in sorted(cfg):
        if name in MAPPED:
            continue
        if name in RELEVANT_UNMAPPED:
            unmapped_relevant[name] = {"value": json_safe(cfg[name]),
                                       "why": RELEVANT_UNMAPPED[name]}
        else:
            ignored.append(name)
    scenario = {
        "name": opts.name,
        "description": "Imported from SGLang dump(s) by kvsim import-sglang (configuration "
                       "from %s)" % cfg_source,
        "seed": opts.seed,
        "cache": cache,
        "workload": {"kind": "uniform", "requests": len(requests)},
        "scheduler": sched,
        "faults": {"enabled": opts.faults == "on"},
        "check": {"full_every": 0},
    }
    return scenario, unmapped_relevant, ignored


def json_safe(v, depth=0, budget=None):
    """v as JSON data, cut at depth 4, 20 items per container and 400 values in all (a value
    that shares sub-objects is never walked as the tree it unfolds to)."""
    if budget is None:
        budget = [400]
    budget[0] -= 1
    if budget[0] < 0:
        return "..."
    v = plain(v)
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(1 << 63) <= v < 1 << 64 else short(v)
    if isinstance(v, str):
        return text(v[:200])
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if depth > 4:
        return "..."
    if isinstance(v, (set, frozenset)):
        return sorted(json_safe(x, depth + 1, budget) for x in list(v)[:20]) \
            if all(isinstance(x, str) for x in list(v)[:20]) else \
            [json_safe(x, depth + 1, budget) for x in list(v)[:20]]
    if isinstance(v, (list, tuple)):
        return [json_safe(x, depth + 1, budget) for x in list(v)[:20]]
    if isinstance(v, dict):
        return {text(k[:200]) if isinstance(k, str) else short(k): json_safe(x, depth + 1, budget)
                for k, x in list(v.items())[:20]}
    if isinstance(v, Record):
        return {"class": v.sglang_name}
    return text(short(v))


# ---------------------------------------------------------------------------------------------
# The command


class _CliArgumentParser(argparse.ArgumentParser):
    """argparse with kvsim's command-line exit codes (docs/cli.md): 109 for an unknown flag,
    106 for a missing one, 105 for a bad flag value; 2 stays for bad input files."""

    def error(self, message):
        if message.startswith("unrecognized arguments"):
            code = 109
        elif message.startswith("the following arguments are required"):
            code = 106
        else:
            code = 105
        self.print_usage(sys.stderr)
        self.exit(code, f"{self.prog}: error: {message}\n")


def parse_args(argv):
    p = _CliArgumentParser(
        prog="kvsim import-sglang",
        description="Convert SGLang crash dumps (--crash-dump-folder) and request dumps "
                    "(--dump-requests-folder) into a kvsim workload trace. A directory takes "
                    "every .pkl under it. Reads pickles with an allow-list: nothing in the "
                    "file is imported or run.")
    p.add_argument("dumps", nargs="+", help="dump files (.pkl) or folders of them")
    p.add_argument("-o", "--out", help="workload trace to write (default: <first dump>.workload"
                                       ".jsonl in the current folder)")
    p.add_argument("--ms-per-tick", type=float, default=1.0,
                   help="milliseconds of created_time per simulator tick (default 1)")
    p.add_argument("--name", default="sglang-dump", help="scenario name in the header")
    p.add_argument("--seed", type=int, default=1, help="scenario seed (default 1)")
    p.add_argument("--strict", action="store_true",
                   help="a request that cannot be imported is an error, not a counted skip")
    g = p.add_argument_group("overrides (win over what the dump recorded)")
    g.add_argument("--page-size", type=int)
    g.add_argument("--device-tokens", type=int, help="device KV pool size in tokens")
    g.add_argument("--host-tokens", type=int, help="host KV pool size in tokens")
    g.add_argument("--hierarchical", choices=["on", "off"], help="HiCache on or off")
    g.add_argument("--write-policy",
                   choices=["write_through", "write_through_selective", "write_back"])
    g.add_argument("--storage", choices=["on", "off"], help="storage tier on or off")
    g.add_argument("--prefetch-policy", choices=["best_effort", "wait_complete", "timeout"])
    g.add_argument("--chunk-tokens", type=int, help="chunked prefill size")
    g.add_argument("--max-running", type=int, help="max running requests")
    g.add_argument("--faults", choices=["on", "off"], default="off",
                   help="fault injection in the scenario (default off: fidelity runs)")
    lim = p.add_argument_group("limits (hostile or absurd input)")
    lim.add_argument("--max-requests", type=int, default=500_000)
    lim.add_argument("--max-prompt-tokens", type=int, default=1 << 24)
    lim.add_argument("--max-total-tokens", type=int, default=1 << 28,
                     help="prompt tokens over all requests")
    lim.add_argument("--max-file-mb", type=int, default=4096)
    opts = p.parse_args(argv)
    for name in ("page_size", "device_tokens", "host_tokens", "chunk_tokens", "max_running"):
        v = getattr(opts, name)
        if v is not None and v < 1:
            p.error("--%s: must be at least 1" % name.replace("_", "-"))
    if opts.page_size and opts.page_size > 1 << 16:
        p.error("--page-size: at most 65536")
    if not opts.ms_per_tick > 0 or not math.isfinite(opts.ms_per_tick):
        p.error("--ms-per-tick: must be a positive number")
    if opts.seed < 0:
        p.error("--seed: must be non-negative")
    return opts


def dump_files(paths):
    """[(path, found in a folder)]: a dump found in a folder that cannot be read is skipped with a
    note (one bad file does not cost the folder); a dump named on the command line is an error."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs.sort()
                found += [(os.path.join(root, n), True) for n in sorted(names)
                          if n.endswith(".pkl")]
            if not found:
                raise ImportFailure("%s: no .pkl dumps in this folder" % path)
            files += found
        else:
            files.append((path, False))
    return files


MAX_TICK = 1 << 39  # the scenario's max_ticks (2 * last + 10^7) stays below 2^40


def run(argv):
    opts = parse_args(argv)
    listed = dump_files(opts.dumps)
    files = []  # the dumps read
    skipped_files = []  # "<file>: <why>" of dumps found in a folder that could not be read
    inert = set()  # SGLang classes read as inert records
    dropped_keys = []  # configuration keys that are not argument names
    requests, skipped, dup = [], [], 0
    config, config_source, config_file = None, "none", None
    config_differs = False
    by_rid = {}  # SGLang rid -> position in requests
    total_tokens = 0
    states = {"finished": 0, "unfinished": 0, "aborted": 0}
    for path, in_folder in listed:
        try:
            doc, classes = load_dump(path, opts.max_file_mb << 20)
        except ImportFailure as e:
            if not in_folder or opts.strict:
                raise
            skipped_files.append(str(e))
            continue
        files.append(path)
        inert.update(classes)
        if not isinstance(doc, dict):
            raise ImportFailure("%s: expected a dict with server_args and requests, got %s" %
                                (path, type(doc).__name__))
        if "requests" not in doc:
            raise ImportFailure("%s: field requests: missing (not an SGLang dump?)" % path)
        entries = plain(doc["requests"])
        if not isinstance(entries, list):
            raise ImportFailure("%s: field requests: expected a list, got %s" %
                                (path, type(entries).__name__))
        if len(entries) + len(requests) > opts.max_requests:
            raise ImportFailure("%s: field requests: %d requests is more than --max-requests %d"
                                % (path, len(entries) + len(requests), opts.max_requests))
        cfg, src = dump_config(doc, path, dropped_keys)
        if cfg is not None:
            if config is not None and json_safe(cfg) != json_safe(config):
                config_differs = True
            config, config_source, config_file = cfg, src, path
        seen_ids = {}  # id() of this dump's input_ids lists (valid while the dump is alive)
        for i, entry in enumerate(entries):
            try:
                try:
                    r = read_request(entry, i, path, opts, seen_ids)
                except (Skip, RecursionError, MemoryError):
                    raise
                except Exception as e:  # a shape of hostile data no check above names
                    raise Skip("", "cannot be read (%s: %s)" % (type(e).__name__, short(str(e))))
            except Skip as s:
                where = "%s: request %d%s" % (path, i, ": field " + s.field if s.field else "")
                if opts.strict:
                    raise ImportFailure("%s: %s" % (where, s.problem))
                skipped.append("%s: %s" % (where, s.problem))
                continue
            if r.rid is not None and r.rid in by_rid:
                # The same request in two dumps: keep its latest state, finished first.
                pos = by_rid[r.rid]
                dup += 1
                if requests[pos].state == "finished" and r.state != "finished":
                    continue
                requests[pos] = r
                continue
            if r.rid is not None:
                by_rid[r.rid] = len(requests)
            requests.append(r)
            total_tokens += len(r.prompt)
            if total_tokens > opts.max_total_tokens:
                raise ImportFailure("%s: request %d: the prompts so far hold %d tokens, more than "
                                    "--max-total-tokens %d" % (path, i, total_tokens,
                                                              opts.max_total_tokens))
        del doc, entries, seen_ids
    if not files:
        raise ImportFailure("no readable dump (%d skipped); first: %s" %
                            (len(skipped_files), skipped_files[0]))
    if not requests:
        raise ImportFailure("%s: no importable requests (%d skipped)%s" %
                            (files[0] if len(files) == 1 else "the dumps", len(skipped),
                             "; first: " + skipped[0] if skipped else ""))

    requests.sort(key=lambda r: (r.created, r.source, r.index))
    t0 = requests[0].created
    namespaces = {}
    for r in requests:
        ticks = (r.created - t0) * 1000.0 / opts.ms_per_tick
        if not ticks <= MAX_TICK:
            raise ImportFailure(
                "%s: request %d: field created_time: %.17g s after the first request is more "
                "than 2^39 ticks at --ms-per-tick %g (raise --ms-per-tick)" %
                (r.source, r.index, r.created - t0, opts.ms_per_tick))
        r.tick = int(round(ticks))
        states[r.state] += 1
        if r.ns_key is not None and r.ns_key not in namespaces:
            namespaces[r.ns_key] = len(namespaces) + 1

    notes, assumed = {}, {}
    if inert:
        notes["sglang_classes"] = (
            "%d SGLang class(es) the importer does not model read as inert data (nothing run): "
            "%s" % (len(inert), ", ".join(sorted(inert)[:10])))
    if dropped_keys:
        notes["configuration_keys"] = (
            "%d configuration key(s) that are not argument names ignored: %s" %
            (len(dropped_keys), ", ".join(dropped_keys[:5])))
    if skipped_files:
        notes["unreadable_dumps"] = "%d dump(s) in the folder(s) skipped: %s" % (
            len(skipped_files), "; ".join(skipped_files[:5]))
    if config_differs:
        notes["configuration"] = ("the dumps record different server arguments; those of %s "
                                  "(the last read) are used" % config_file)
    scenario, unmapped, ignored = build_scenario(config, config_source, requests, opts, notes,
                                                 assumed)
    standin = sum(1 for r in requests if r.standin)
    header = {
        "kvsim_trace": 1, "kind": "workload", "seed": opts.seed, "scenario": scenario,
        "import": {
            "from": "sglang",
            "dumps": [shown_path(f) for f in files],
            "skipped_dumps": len(skipped_files),
            "config_from": config_source if config is not None else "none (server_args None)",
            "requests": len(requests),
            "finished": states["finished"], "unfinished": states["unfinished"],
            "aborted": states["aborted"],
            "skipped": len(skipped), "duplicates": dup,
            "text_stand_in": standin,
            "stand_in_tokenisation": "%d UTF-8 bytes per token, FNV-1a" % STANDIN_BYTES
                                     if standin else None,
            "ms_per_tick": opts.ms_per_tick,
            "namespaces": [{"ns": ns, "extra_key": k[0], "lora": k[1]}
                           for k, ns in namespaces.items()],
            "assumed": assumed,
            "notes": notes,
            "unmapped": unmapped,
            "ignored_arguments": ignored,
        },
    }
    out_path = opts.out or (os.path.splitext(os.path.basename(files[0]))[0] + ".workload.jsonl")
    try:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(json.dumps(json_text(header), separators=(",", ":")) + "\n")
            for n, r in enumerate(requests, 1):
                line = {"rid": n, "tick": r.tick,
                        "ns": namespaces.get(r.ns_key, 0) if r.ns_key else 0,
                        "prompt": r.prompt.tolist(), "output_len": r.output_len}
                if r.abort_at is not None:
                    line["abort_at"] = r.abort_at
                if r.reported:
                    line["reported"] = r.reported
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
    except OSError as e:
        raise ImportFailure("%s: cannot write (%s)" % (out_path, e.strerror or e))

    err = sys.stderr
    print("%s: %d requests imported from %d dump(s) (%d finished, %d unfinished, %d aborted); "
          "%d skipped, %d duplicates merged" %
          (shown_path(out_path), len(requests), len(files), states["finished"],
           states["unfinished"], states["aborted"], len(skipped), dup))
    print("  configuration from %s" % (config_source if config is not None else
                                       "nothing: server_args is None in every dump; defaults"),
          file=err)
    for s in skipped[:10]:
        print("  skipped %s" % s, file=err)
    if len(skipped) > 10:
        print("  ... %d more skipped (--strict makes the first an error)" % (len(skipped) - 10),
              file=err)
    if standin:
        print("  %d request(s) had text but no input_ids: prompts are a stand-in tokenisation "
              "(%d bytes per token), flagged stand_in in the trace" % (standin, STANDIN_BYTES),
              file=err)
    for k, v in assumed.items():
        print("  assumed %s: %s" % (k, v), file=err)
    for k, v in notes.items():
        print("  note %s: %s" % (k, v), file=err)
    for k, v in unmapped.items():
        print("  not mapped %s = %s (%s)" % (k, json.dumps(v["value"]), v["why"]), file=err)
    if ignored:
        print("  %d other argument(s) do not affect the cache model (listed in the header under "
              "import.ignored_arguments)" % len(ignored), file=err)
    for s in skipped_files[:10]:
        print("  skipped dump %s" % s, file=err)
    print("  next: kvsim run --workload %s" % shown_path(out_path), file=err)
    return 0


def json_text(v):
    """The header (built here, a tree) with every string valid for a JSON reader."""
    if isinstance(v, str):
        return text(v)
    if isinstance(v, dict):
        return {text(str(k)): json_text(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_text(x) for x in v]
    return v


def main(argv):
    try:
        return run(argv)
    except ImportFailure as e:
        print("kvsim: %s" % e, file=sys.stderr)
        return EXIT_BAD_INPUT
    except RecursionError:
        print("kvsim: refused: the dump nests too deeply", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("kvsim: refused: out of memory (absurd sizes in the dump?)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
