"""Stand-in for sglang.srt.mem_cache.registry (kvsim's tests only)."""

_REGISTRY = {}


def register_radix_cache_backend(name, factory):
    if not name.strip():
        raise ValueError("name must be non-empty")
    if name in _REGISTRY:
        raise ValueError(f"{name!r} is already registered")
    _REGISTRY[name] = factory


def get_radix_cache_factory(name):
    return _REGISTRY.get(name)


def registered_radix_cache_backends():
    return list(_REGISTRY)
