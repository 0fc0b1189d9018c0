"""The content checks of the SGLang target (checks.py names them too): the model's reads of
device and host KV, and the full walk that compares every cached node's bytes with the content
of its prefix (content.py), batched, with the node-by-node walk to name the first difference."""

import operator

import torch

from kvsim.fakecuda.tensor import is_device
from kvsim.sglang_target.check_base import NodeValues, Violation, _as_int64, ns_of_extra_key, walk
from kvsim.sglang_target.content import expected_kv, expected_kv_of_base, hash_base, prefix_hashes


def read_device_kv(target, slots, wait=False):
    """(K, V) host copies [layers, n, heads, dim] of the device slots. wait: read as the model
    does (get_key_buffer waits on the layer transfer counter)."""
    pool = target.kv_pool
    ks, vs = [], []
    idx = slots if is_device(slots) else slots.to("cuda")
    for layer in range(target.cfg.layer_count):
        kb = pool.get_key_buffer(layer) if wait else pool.k_buffer[layer]
        vb = pool.get_value_buffer(layer) if wait else pool.v_buffer[layer]
        ks.append(kb[idx].cpu())
        vs.append(vb[idx].cpu())
    return torch.stack(ks), torch.stack(vs)


def read_host_kv(target, host_indices):
    hp = target.host_pool
    idx = host_indices.to(torch.int64)
    out = []
    for buf in (hp.k_buffer, hp.v_buffer):
        if hp.layout == "layer_first":
            x = buf[:, idx]
        elif hp.layout == "page_first":
            x = buf[idx].transpose(0, 1)
        elif hp.layout == "page_first_direct":
            x = buf[idx // hp.page_size, :, idx % hp.page_size].transpose(0, 1)
        elif hp.layout == "page_head":
            x = buf[idx // hp.page_size, :, idx % hp.page_size].permute(2, 0, 1, 3)
        else:
            raise ValueError(f"kvsim cannot read host layout {hp.layout!r}")
        out.append(x.reshape(target.cfg.layer_count, len(idx), 1, target.cfg.head_dim))
    return out[0], out[1]


def compare(what, got, hashes, target):
    want_k, want_v = expected_kv(hashes, target.cfg.layer_count, 1, target.cfg.head_dim)
    for name, g, w in (("K", got[0], want_k), ("V", got[1], want_v)):
        g = g.reshape(w.shape)
        if not torch.equal(g, w):
            bad = (g != w).reshape(w.shape[0], w.shape[1], -1).any(dim=2).any(dim=0).nonzero().flatten()
            return Violation("content", f"{what}: {name} bytes of {len(bad)} of {len(hashes)} positions "
                                        f"differ from the content function (first at offset {int(bad[0])})")
    return None


# (ns, seed hash, depth, tokens) -> (prefix hashes, hash_base, expected bytes by shape): a node's
# hashes are a pure function of these, and most nodes outlive many checks. Cleared when it grows
# past the cap.
_HASH_MEMO = {}
_HASH_MEMO_CAP = 1 << 16


def _node_hashes(ns, seed, depth, tokens):
    hashes, base, _ = _node_entry(ns, seed, depth, tokens)
    return hashes, base


def check_content_full(target, nodes=None, values=None):
    """Every cached node's device and host bytes equal the content of its prefix.

    One batched read and compare of all nodes (a few tensor ops per check instead of a few per
    node); only when that finds a difference (or raises) does the node-by-node walk run, to name
    the first differing node exactly as it always has. `nodes`: walk(root) of the tree as it is
    now, when the caller has walked it already; `values`: their NodeValues, shared with the
    slots check of the same call."""
    try:
        if _content_full_batched(target, nodes, values):
            return None
    except Exception:  # noqa: BLE001 - the node-by-node walk reports it as it always did
        pass
    return _content_full_by_node(target)


def _content_scope(target):
    """(check device, check host): bytes still in flight are not checked: device values while a
    load is queued, host values while a write is (their acks may be unconsumed later; the bytes
    are there by then)."""
    cc = target.controller
    check_device = cc is None or (not cc.load_queue and not cc.load_stream.queue)
    check_host = cc is not None and not cc.write_queue and not cc.write_stream.queue
    return check_device, check_host


def _content_full_batched(target, nodes=None, values=None):
    """True when every node's bytes equal the content function (same walk, same scope as
    _content_full_by_node, all positions compared at once, on plain tensors: the device's own
    read path, copy_to_host, still makes the one host copy). A node's expected bytes are made
    once per (prefix, shape) and kept (_node_expected); a check whose nodes' prefixes are the
    previous check's, in the same order, reuses the previous check's concatenation of them."""
    root = target.cache.root_node
    if nodes is None:
        nodes = walk(root)
    check_device, check_host = _content_scope(target)
    cfg = target.cfg
    layers, width = cfg.layer_count, cfg.head_dim
    dev_exp, host_idx, host_exp = [], [], []
    # walk()'s order is a stack's: each node pops one entry and pushes one per child, all with
    # the same (parent's last hash, depth below it), so a stack of those alone follows the walk.
    stack = [(None, 0)] * len(root.children)
    memo_get = _HASH_MEMO.get
    with torch._C.DisableTorchFunction():
        for node in nodes:
            seed, depth = stack.pop()
            key = node.key
            n = len(key)
            extra = key.extra_key
            tokens = tuple(key.token_ids[:n])
            ns = 0 if extra is None else ns_of_extra_key(extra)
            entry = memo_get((ns, seed, depth, tokens)) or _node_entry(ns, seed, depth, tokens)
            value, host_value = node.value, node.host_value
            if check_device and value is not None and value.shape[0]:
                dev_exp.append(entry)
            if check_host and host_value is not None and host_value.shape[0]:
                host_idx.append(host_value)
                host_exp.append(entry)
            if node.children:
                hashes = entry[0]
                last = hashes[-1] if hashes else seed
                stack.extend([(last, depth + n)] * len(node.children))
        if stack:
            return False  # the tree is not the walked one (the node-by-node walk reads it afresh)
        if dev_exp:
            idx = (values or NodeValues(nodes)).joined()[0]
            pool = target.kv_pool
            # [2 layers, rows, ...] of K then V, gathered at once: [2 layers, positions, ...]
            bufs = torch.stack([b.as_subclass(torch.Tensor) for b in pool.k_buffer[:layers]]
                               + [b.as_subclass(torch.Tensor) for b in pool.v_buffer[:layers]])
            got = target.device.copy_to_host(bufs.index_select(1, idx))
            want = _expected_of(dev_exp, "device", layers, width)
            if want.shape[1] != idx.shape[0] or not torch.equal(got.reshape(want.shape), want):
                return False
    if host_idx:
        with torch._C.DisableTorchFunction():
            idx = torch.cat(host_idx).as_subclass(torch.Tensor)
        got = _read_host_kv_plain(target, idx)
        want = _expected_of(host_exp, "host", layers, width)
        if want.shape[1] != idx.shape[0]:
            return False
        for g, w in zip(got, (want[:layers], want[layers:])):
            if not torch.equal(g.reshape(w.shape), w):
                return False
    return True


def _read_host_kv_plain(target, idx):
    """read_host_kv's values, by index_select on the two plain layouts (an index it would wrap
    raises here, and the node-by-node walk then reads as read_host_kv does)."""
    hp = target.host_pool
    if hp.layout not in ("layer_first", "page_first") or type(hp.k_buffer) is not torch.Tensor \
            or type(hp.v_buffer) is not torch.Tensor:
        return read_host_kv(target, idx)
    idx = _as_int64(idx)
    dim = 1 if hp.layout == "layer_first" else 0
    out = []
    for buf in (hp.k_buffer, hp.v_buffer):
        x = buf.index_select(dim, idx)
        out.append(x if dim == 1 else x.transpose(0, 1))
    return out


# node key -> [prefix hashes, hash_base, {(layers, width): expected K and V}]: what a node's
# bytes must be is a pure function of its key (ns, seed hash, depth, tokens); most nodes outlive
# many checks. The expected bytes are counted and all forgotten past a budget.
_EXPECTED_BYTES_CAP = 64 << 20
_expected_bytes = [0]
# side -> (the entries of the previous check, their expected bytes concatenated)
_LAST_EXPECTED = {}


def _node_entry(ns, seed, depth, tokens):
    key = (ns, seed, depth, tuple(tokens))
    got = _HASH_MEMO.get(key)
    if got is None:
        padded = [0] * depth + list(tokens)
        hashes = prefix_hashes(ns, padded, depth, seed) if depth else prefix_hashes(ns, padded)
        if len(_HASH_MEMO) >= _HASH_MEMO_CAP:
            _HASH_MEMO.clear()
            _expected_bytes[0] = 0
        got = _HASH_MEMO[key] = (hashes, hash_base(hashes), {})
    return got


def _node_expected(entry, layers, width):
    """[2 layers, positions, width] float32: the node's expected K (layers 0..) then V."""
    got = entry[2].get((layers, width))
    if got is None:
        k, v = expected_kv_of_base(entry[1], layers, 1, width)
        got = torch.cat([k, v]).reshape(2 * layers, len(entry[1]), width)
        if _expected_bytes[0] > _EXPECTED_BYTES_CAP:
            for e in _HASH_MEMO.values():
                e[2].clear()
            _LAST_EXPECTED.clear()
            _expected_bytes[0] = 0
        _expected_bytes[0] += got.numel() * got.element_size()
        entry[2][(layers, width)] = got
    return got


def _expected_of(entries, side, layers, width):
    """The expected bytes of these nodes' positions, concatenated in order."""
    last = _LAST_EXPECTED.get(side)
    if last is not None and last[1] == (layers, width) and len(last[0]) == len(entries) \
            and all(map(operator.is_, last[0], entries)):
        return last[2]
    with torch._C.DisableTorchFunction():
        want = torch.cat([_node_expected(e, layers, width) for e in entries], dim=1)
    _LAST_EXPECTED[side] = (entries, (layers, width), want)
    return want


def _content_full_by_node(target):
    root = target.cache.root_node
    check_device, check_host = _content_scope(target)
    stack = [(c, None, 0) for c in reversed(list(root.children.values()))]
    while stack:
        node, seed, depth = stack.pop()
        tokens = list(node.key.token_ids)[: len(node.key)]
        ns = ns_of_extra_key(node.key.extra_key)
        # prefix_hashes over a virtual sequence: positions depth..depth+len, seeded by the parent
        padded = [0] * depth + tokens
        hashes = prefix_hashes(ns, padded, depth, seed) if depth else prefix_hashes(ns, padded)
        if check_device and node.value is not None and len(node.value):
            v = compare(f"node {node.id} device KV", read_device_kv(target, node.value), hashes, target)
            if v:
                return v
        if check_host and node.host_value is not None and len(node.host_value):
            v = compare(f"node {node.id} host KV", read_host_kv(target, node.host_value), hashes, target)
            if v:
                return v
        last = hashes[-1] if hashes else seed
        for c in reversed(list(node.children.values())):
            stack.append((c, last, depth + len(tokens)))
    return None
