"""Stand-in for sglang.srt.layers.dp_attention: no data-parallel attention, one rank."""

from kvsim.sglang_target.dummy import fallback_getattr

_ctx = _kvsim_load  # noqa: F821 - injected by the loader


def is_dp_attention_enabled():
    return False


def get_attention_tp_rank():
    return 0


def get_attention_tp_size():
    return 1


def get_attention_dp_rank():
    return 0


def get_attention_dp_size():
    return 1


def get_attention_cp_rank():
    return 0


def get_attention_cp_size():
    return 1


__getattr__ = fallback_getattr(__name__, globals())
