"""Stand-in for `msgspec` (absent here): `Struct` subclasses become dataclasses with the same
construction, equality, hashing (frozen) and keyword-only rules, which is all SGLang's cache
uses them for (plain records, never encoded)."""

import dataclasses
import types

from kvsim.sglang_target.dummy import StandinUnavailable, fallback_getattr

__path__ = []
NODEFAULT = dataclasses.MISSING
UNSET = None


class Struct:
    def __init_subclass__(cls, frozen=False, kw_only=False, **_options):
        super().__init_subclass__()
        # msgspec copies empty mutable defaults per instance; dataclasses want a factory.
        for name in cls.__dict__.get("__annotations__", {}):
            value = cls.__dict__.get(name, dataclasses.MISSING)
            if isinstance(value, (list, dict, set, bytearray)):
                if value:
                    raise TypeError(f"kvsim msgspec stand-in: non-empty mutable default for {name}")
                setattr(cls, name, dataclasses.field(default_factory=type(value)))
        # Options msgspec has and dataclasses lack (array_like, tag, gc, omit_defaults...) only
        # change encoding, which the cache never does.
        dataclasses.dataclass(cls, frozen=frozen, kw_only=kw_only, eq=True)


def field(*, default=dataclasses.MISSING, default_factory=dataclasses.MISSING, name=None):
    return dataclasses.field(default=default, default_factory=default_factory)


structs = types.ModuleType(__name__ + ".structs")
structs.replace = dataclasses.replace
structs.asdict = dataclasses.asdict
structs.astuple = dataclasses.astuple
structs.fields = dataclasses.fields



class _Codec:
    """msgpack Encoder/Decoder: constructible (io_struct builds them at import), unusable."""

    def __init__(self, *args, **kwargs):
        pass

    def _unavailable(self, *args, **kwargs):
        raise StandinUnavailable("kvsim stand-in: msgspec.msgpack encoding is not available")

    encode = decode = encode_into = _unavailable


msgpack = types.ModuleType(__name__ + ".msgpack")
msgpack.Encoder = msgpack.Decoder = _Codec

__getattr__ = fallback_getattr(__name__, globals())
