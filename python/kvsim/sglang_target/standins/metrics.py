"""Stand-in for sglang.srt.observability.metrics_collector (and the older metrics paths):
collectors that record what SGLang logs into plain counters, for checks and reports."""

import collections

from kvsim.sglang_target.dummy import fallback_getattr

STAT_LOGGER_ROLE_RADIX_CACHE = "radix_cache"
STAT_LOGGER_ROLE_STORAGE = "storage"


class _Collector:
    """Every method call is counted: totals[name] sums numeric first arguments, calls[name] counts."""

    def __init__(self, *args, **kwargs):
        self.labels = kwargs.get("labels")
        self.totals = collections.defaultdict(float)
        self.calls = collections.defaultdict(int)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def record(*args, **_kwargs):
            self.calls[name] += 1
            if args and isinstance(args[0], (int, float)):
                self.totals[name] += args[0]

        return record


class RadixCacheMetricsCollector(_Collector):
    pass


class StorageMetricsCollector(_Collector):
    pass


def resolve_collector_class(role=None, *args, **kwargs):
    if role == STAT_LOGGER_ROLE_STORAGE:
        return StorageMetricsCollector
    return RadixCacheMetricsCollector


__getattr__ = fallback_getattr(__name__, globals())
