"""Stand-in for sglang.srt.runtime_context (August 2026 on): a single process, TP = PP = 1.

Each get_<section>() returns a settable namespace; reading a value the driver never set gives
an empty namespace, which is falsy (a flag reads as off). The driver sets what its ops need:
`configure(schedule={"page_size": 4}, ...)`."""

from kvsim.sglang_target.dummy import fallback_getattr

_ctx = _kvsim_load  # noqa: F821 - injected by the loader


class Section:
    def __init__(self, name, values=None):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", dict(values or {}))

    def __getattr__(self, key):
        if key.startswith("__"):
            raise AttributeError(key)
        values = object.__getattribute__(self, "_values")
        if key not in values:
            values[key] = Section(f"{self._name}.{key}")
        return values[key]

    def __setattr__(self, key, value):
        self._values[key] = value

    def __bool__(self):
        return any(not isinstance(v, Section) or bool(v) for v in self._values.values())

    def __repr__(self):
        return f"<kvsim runtime context {self._name}>"


_sections = {name: Section(name) for name in (
    "context", "disagg", "exec", "memory", "observability", "schedule", "server_args",
    "serving", "spec")}
_sections["parallel"] = Section("parallel", _ctx.parallel_defaults())


def configure(**sections):
    """configure(schedule={"page_size": 4}, parallel={...}): set runtime context values."""
    for name, values in sections.items():
        section = _sections.setdefault(name, Section(name))
        for key, value in values.items():
            setattr(section, key, value)


def publish(server_args, *, role, hf_config=None):  # noqa: ARG001 - SGLang's signature
    """SGLang's process-wide publish (the legacy set_global_server_args_for_* shims call it):
    get_server_args() and get_context().server_args read the published ServerArgs back, last
    publish wins. The role is provenance only (no namespace enforcement here)."""
    _sections["server_args"] = server_args
    _sections["context"].server_args = server_args
    return _sections["context"]


def _getter(name):
    def get():
        return _sections[name]
    get.__name__ = f"get_{name}"
    return get


get_context = _getter("context")
get_disagg = _getter("disagg")
get_exec = _getter("exec")
get_memory = _getter("memory")
get_observability = _getter("observability")
get_parallel = _getter("parallel")
get_schedule = _getter("schedule")
get_server_args = _getter("server_args")
get_serving = _getter("serving")
get_spec = _getter("spec")

__getattr__ = fallback_getattr(__name__, globals())
