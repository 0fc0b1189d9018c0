"""Stand-in for sglang.srt.distributed and .parallel_state: one rank (TP = PP = 1) whose groups
are a real single-rank gloo process group, so SGLang's all_reduce / barrier calls really run."""

from kvsim.sglang_target.dummy import fallback_getattr

_ctx = _kvsim_load  # noqa: F821 - injected by the loader
__path__ = []


def get_tensor_model_parallel_rank():
    return 0


def get_tensor_model_parallel_world_size():
    return 1


get_pipeline_model_parallel_rank = get_tensor_model_parallel_rank
get_pipeline_model_parallel_world_size = get_tensor_model_parallel_world_size


class GroupCoordinator:
    """One-rank coordinator: `device_group` and `cpu_group` are the gloo group."""

    def __init__(self, name="tp"):
        self.unique_name = name
        self.rank = 0
        self.ranks = [0]
        self.world_size = 1
        self.rank_in_group = 0
        self.local_rank = 0
        self.is_first_rank = True
        self.is_last_rank = True
        self.device_group = _ctx.process_group()
        self.cpu_group = self.device_group

    def all_reduce(self, tensor):
        return tensor

    def barrier(self):
        pass


_groups = {}


def _group(name):
    if name not in _groups:
        _groups[name] = GroupCoordinator(name)
    return _groups[name]


def get_tp_group():
    return _group("tp")


def get_pp_group():
    return _group("pp")


def get_world_group():
    return _group("world")


get_attention_tp_group = get_tp_group


def create_custom_parallel_group(group_ranks=None, backend=None, **_kwargs):
    if group_ranks is not None and list(group_ranks) not in ([0], (0,)) and list(group_ranks) != [0]:
        raise ValueError(f"kvsim runs one rank; cannot make a group of ranks {group_ranks}")
    return _ctx.process_group()


def kvsim_tp_group():
    """The single-rank gloo group a driver passes as SGLang's tp_cache_group."""
    return _ctx.process_group()


__getattr__ = fallback_getattr(__name__, globals())
