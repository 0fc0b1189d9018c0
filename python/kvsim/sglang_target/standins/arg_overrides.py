"""Stand-in for sglang.srt.arg_groups.overrides (August 2026 on; ServerArgs.mamba_cache_chunk_size
reads the page size through it). SGLang's resolved_view overlays declarations still being
resolved; the ServerArgs kvsim builds are already resolved (their fields carry the values), which
is the case SGLang's docstring names: read the fields directly. So the view is the object itself."""

from kvsim.sglang_target.dummy import fallback_getattr


def resolved_view(server_args):
    return server_args


__getattr__ = fallback_getattr(__name__, globals())
