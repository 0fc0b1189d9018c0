"""Stand-in for `msgspec` (absent here): `Struct` subclasses become dataclasses with the same
construction, equality, hashing (frozen) and keyword-only rules, which is all SGLang's cache
uses them for (plain records, never encoded)."""

import dataclasses
import types

from kvsim.sglang_target.dummy import fallback_getattr

__path__ = []
NODEFAULT = dataclasses.MISSING
UNSET = None


class Struct:
    def __init_subclass__(cls, frozen=False, kw_only=False, **_options):
        super().__init_subclass__()
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

__getattr__ = fallback_getattr(__name__, globals())
