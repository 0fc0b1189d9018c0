"""Stand-in for sglang.srt.environ: `envs.NAME` is a field over os.environ with .get(),
.is_set(), .default, .name, .set() and .override() as SGLang's EnvField has.

SGLang's real defaults live in its environ.py, which is not loaded; fields default to None
(False for the flags below) unless the driver gives defaults through LoadContext.env_defaults."""

import contextlib
import os

_ctx = _kvsim_load  # noqa: F821 - injected by the loader

_TRUE = ("true", "1", "yes", "y", "on")


class EnvField:
    def __init__(self, name, default):
        self.name = name
        self.default = default

    def is_set(self):
        return self.name in os.environ

    def get(self):
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        if isinstance(self.default, bool) or self.default is None and raw.lower() in _TRUE + ("false", "0", "no", "off"):
            return raw.strip().lower() in _TRUE
        for kind in (int, float):
            if isinstance(self.default, kind):
                return kind(raw)
        return raw

    @property
    def value(self):
        return self.get()

    def set(self, value):
        if value is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = str(value)

    def clear(self):
        os.environ.pop(self.name, None)

    @contextlib.contextmanager
    def override(self, value):
        old = os.environ.get(self.name)
        self.set(value)
        try:
            yield
        finally:
            self.set(old)

    def __bool__(self):
        return bool(self.get())

    def __repr__(self):
        return f"EnvField({self.name}={self.get()!r})"


class Envs:
    def __init__(self, defaults):
        self._defaults = dict(defaults)
        self._fields = {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        field = self._fields.get(name)
        if field is None:
            field = EnvField(name, self._defaults.get(name, False if _looks_like_flag(name) else None))
            self._fields[name] = field
        return field


def _looks_like_flag(name):
    return any(part in name for part in ("_ENABLE_", "_DISABLE_", "_USE_", "_OPT_", "_DEBUG_", "_LOG_"))


envs = Envs(_ctx.env_defaults)
