"""Inert stand-ins for whatever SGLang's cache modules import but a cache does not need.

A dummy module answers every attribute with a dummy; a dummy answers attributes, subscripts,
`|`, iteration (empty) and subclassing, so import-time uses (`from x import Y`, type hints,
`class Foo(Y)`) pass, and raises `StandinUnavailable` naming itself when it is *called* or
used as a value, so a path that really needs it is visible."""

from __future__ import annotations

import types


class StandinUnavailable(RuntimeError):
    """Code under test called something kvsim only stands in for."""


class _DummyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return make_dummy(f"{cls._kvsim_name}.{name}")

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_kvsim_is_dummy"):
            raise StandinUnavailable(f"kvsim stand-in: {cls._kvsim_name} is not available "
                                     f"(SGLang code called it; kvsim does not emulate it)")
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __repr__(cls):
        if cls.__dict__.get("_kvsim_is_dummy"):
            return f"<kvsim stand-in {cls._kvsim_name}>"
        return super().__repr__()

    def __mro_entries__(cls, bases):  # pragma: no cover - classes are bases already
        return (cls,)


def make_dummy(name: str):
    """A fresh dummy named `name` (a class, so SGLang may subclass it or use it in hints)."""
    return _DummyMeta(name.rsplit(".", 1)[-1], (), {"_kvsim_name": name, "_kvsim_is_dummy": True,
                                                   "__module__": name.rsplit(".", 1)[0]})


def is_dummy(obj) -> bool:
    return isinstance(obj, _DummyMeta) and obj.__dict__.get("_kvsim_is_dummy", False)


class DummyModule(types.ModuleType):
    """A module whose every missing attribute is a dummy (cached, so `a.b is a.b`)."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = make_dummy(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def fallback_getattr(module_name: str, namespace: dict):
    """A module-level __getattr__ for explicit stand-ins: names they do not define are dummies."""

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = make_dummy(f"{module_name}.{name}")
        namespace[name] = value
        return value

    return __getattr__
