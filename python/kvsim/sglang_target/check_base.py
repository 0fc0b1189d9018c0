"""What the SGLang target's checks share (checks.py, content_checks.py, the hybrid and Mamba
checks): the Violation they return, the namespace <-> extra_key mapping, the tree walk and the
walked nodes' joined device values."""

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def as_dict(self):
        return {"invariant": self.invariant, "detail": self.detail}


def ns_of_extra_key(extra_key):
    return 0 if extra_key is None else int(str(extra_key).rsplit("ns", 1)[-1])


def extra_key_of_ns(ns):
    return None if int(ns) == 0 else f"kvsim-ns{int(ns)}"


_TB_TO = torch._C._TensorBase.to
_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _as_int64(t):
    """t.to(torch.int64) for a plain host tensor, without the fake device's patched Tensor.to
    (which, for a plain host tensor and a dtype, calls this same method)."""
    return _TB_TO(t, torch.int64)


def walk(root):
    """Nodes below the root, parents before children, children in insertion order."""
    out = []
    stack = list(reversed(list(root.children.values())))
    while stack:
        node = stack.pop()
        out.append(node)
        if node.children:
            stack.extend(reversed(list(node.children.values())))
    return out


class NodeValues:
    """The walked nodes' device values (those with a first dimension), joined once in walk order
    as a plain int64 tensor, for the slots and content checks of one call. Made anew for each
    call, never kept: the fake device writes through aliases that do not bump a tensor's version
    counter, so a join from an earlier call could hold stale indices unseen."""
    __slots__ = ("nodes", "_joined")

    def __init__(self, nodes):
        self.nodes = nodes
        self._joined = None

    def joined(self):
        """(joined values, each node's length): raises as the join does (callers fall back)."""
        if self._joined is None:
            with torch._C.DisableTorchFunction():
                vals = [v for v in (node.value for node in self.nodes) if v is not None and v.shape[0]]
                joined = _as_int64(torch.cat(vals).as_subclass(torch.Tensor)) if vals else \
                    torch.empty(0, dtype=torch.int64)
                if joined.dim() != 1:
                    raise ValueError("node values are not 1-D index tensors")
                self._joined = (joined, [int(v.shape[0]) for v in vals])
        return self._joined
