"""The driver's content function: the KV bytes of a token position are a pure function of
(namespace, the token prefix up to and including it, position, layer, K or V).

A prefix is summarised by a 64-bit rolling hash per position (``prefix_hashes``); the values
written for a position are small integers (exact in float32) derived from that hash, the layer
and K/V. Only the driver writes and reads SGLang's device pool, so this function is its own
(kvsim's core has sim/model/content_oracle.h for the same job)."""

import torch

_MASK = (1 << 64) - 1
_GOLD = 0x9E3779B97F4A7C15


def _mix(x):
    """splitmix64's finaliser: a deterministic 64-bit integer hash."""
    x = (x + _GOLD) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def prefix_hashes(ns, tokens, start=0, seed_hash=None):
    """Hashes h[p] for p in [start, len(tokens)): h[p] covers ns and tokens[0..p]. ``seed_hash``
    is h[start-1] (None: start must be 0)."""
    if start == 0:
        h = _mix(int(ns) & _MASK)
    elif seed_hash is None:
        raise ValueError("prefix_hashes: start > 0 needs the hash of the position before")
    else:
        h = seed_hash
    out = []
    for p in range(start, len(tokens)):
        h = _mix(h ^ ((int(tokens[p]) * 0x100000001B3 + p) & _MASK))
        out.append(h)
    return out


class PrefixHashes:
    """The hashes of one growing token sequence, extended incrementally."""

    __slots__ = ("ns", "tokens", "hashes")

    def __init__(self, ns):
        self.ns = ns
        self.tokens = []
        self.hashes = []

    def extend_to(self, tokens):
        n = len(self.hashes)
        if list(tokens[:n]) != self.tokens[:n]:
            raise ValueError("a request's tokens changed under it (not an extension)")
        if len(tokens) > n:
            seed = self.hashes[-1] if n else None
            self.hashes.extend(prefix_hashes(self.ns, tokens, n, seed))
            self.tokens = list(tokens)
        return self.hashes


def expected_kv(hashes, layer_num, head_num, head_dim, dtype=torch.float32):
    """(K, V) host tensors of shape [layer_num, len(hashes), head_num, head_dim]: the bytes the
    positions with these prefix hashes hold. Values are integers below 2^20 (exact in fp16/bf16
    up to 2^8 ... so float32 is the dtype the target uses)."""
    return expected_kv_of_base(hash_base(hashes), layer_num, head_num, head_dim, dtype)


def hash_base(hashes):
    """The 20 bits of each position's hash that its bytes derive from (an int64 host tensor)."""
    return torch.tensor([h & 0xFFFFF for h in hashes], dtype=torch.int64)


def expected_kv_of_base(base, layer_num, head_num, head_dim, dtype=torch.float32):
    """expected_kv from hash_base(hashes): the checks batch many nodes' positions in one call.

    K = (31 b + 7919 layer + 104729 elem) mod 2^20, V = (17 b + 6007 layer + 130363 elem + 524287)
    mod 2^20. Computed as ((b mod 2^20) * c mod 2^20 + offset[layer, elem]) mod 2^20, which is the
    same number, in int32 (every term stays below 2^26) with the offsets made once per shape."""
    n = len(base)
    width = head_num * head_dim
    off_k, off_v = _offsets(layer_num, width)
    b = (torch.as_tensor(base, dtype=torch.int64) & _M20).to(torch.int32).view(1, n, 1)
    k = ((b * 31) & _M20) + off_k
    v = ((b * 17) & _M20) + off_v
    shape = (layer_num, n, head_num, head_dim)
    return (k & _M20).to(dtype).view(shape), (v & _M20).to(dtype).view(shape)


_M20 = (1 << 20) - 1
_OFFSETS = {}


def _offsets(layer_num, width):
    """The [layer, 1, elem] int32 terms of K and V that do not depend on the position, mod 2^20."""
    got = _OFFSETS.get((layer_num, width))
    if got is None:
        layer = torch.arange(layer_num, dtype=torch.int64).view(-1, 1, 1)
        elem = torch.arange(width, dtype=torch.int64).view(1, 1, -1)
        got = _OFFSETS[(layer_num, width)] = (
            ((layer * 7919 + elem * 104729) % (1 << 20)).to(torch.int32),
            ((layer * 6007 + elem * 130363 + 524287) % (1 << 20)).to(torch.int32))
    return got
