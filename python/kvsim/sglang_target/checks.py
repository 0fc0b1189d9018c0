"""Checks on SGLang's cache state after a driver call, named as kvsim's invariants are
(docs/invariants.md). Each returns None or a Violation (invariant, detail).

The tree walk is O(nodes); the content walk reads every cached node's device and host bytes and
is the expensive one (the driver runs it every `content_every` calls and at quiescence)."""

import dataclasses
import operator

import torch

from kvsim.fakecuda.tensor import DeviceTensor, is_device
from kvsim.sglang_target.content import expected_kv, expected_kv_of_base, hash_base, prefix_hashes


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


def _pages(t, ps):
    if t is None or len(t) == 0:
        return []
    with torch._C.DisableTorchFunction():
        flat = t.as_subclass(torch.Tensor).reshape(-1).to(torch.int64)
        return torch.unique(torch.div(flat, ps, rounding_mode="floor")).tolist()


def check_residency(target, nodes):
    dev = target.device
    hier = target.controller is not None
    for node in nodes:
        # (a tensor is on the device iff is_device: only what is not where it should be, or is
        # not a tensor, goes to the device's check, which makes the message)
        value = node.value
        if value is not None and type(value) is not DeviceTensor:
            msg = dev.check_residency(value, "device", f"node {node.id} value")
            if msg:
                return Violation("residency", msg)
        host_value = node.host_value
        if hier and host_value is not None and (type(host_value) is DeviceTensor
                                                or not isinstance(host_value, torch.Tensor)):
            msg = dev.check_residency(host_value, "host", f"node {node.id} host_value")
            if msg:
                return Violation("residency", msg)
    cc = target.controller
    if cc is not None:
        for qname in ("write_queue", "load_queue"):
            for op in getattr(cc, qname, []):
                msg = dev.check_residency(op.host_indices, "host", f"{qname} op {op.id} host_indices") \
                    or dev.check_residency(op.device_indices, "device", f"{qname} op {op.id} device_indices")
                if msg:
                    return Violation("residency", msg)
    return None


def check_locks(target, nodes):
    cache = target.cache
    evictable = protected = 0
    for node in nodes:
        if node.lock_ref < 0:
            return Violation("tree.lock", f"node {node.id} lock_ref {node.lock_ref} < 0")
        child_sum = sum(c.lock_ref for c in node.children.values()) if node.children else 0
        if node.lock_ref < child_sum:
            return Violation("tree.lock", f"node {node.id} lock_ref {node.lock_ref} < its children's "
                                          f"{child_sum} (a locked node's ancestors must hold the lock)")
        if node.lock_ref > 0:
            protected += len(node.key)
        elif node.value is not None:
            evictable += len(node.key)
    if cache.root_node.lock_ref < 1:
        return Violation("tree.lock", f"the root's lock_ref is {cache.root_node.lock_ref}")
    got_e, got_p = int(cache.evictable_size_), int(cache.protected_size_)
    if (got_e, got_p) != (evictable, protected):
        return Violation("tree.size_accounting", f"evictable_size_={got_e} protected_size_={got_p}, "
                                                 f"recomputed from the tree {evictable} / {protected}")
    return None


def check_tree_shape(target, nodes):
    if target.controller is None:
        return None
    write_through = target.cfg.write_policy != "write_back"
    root = target.cache.root_node
    for node in nodes:
        if node.value is None and node.host_value is None:
            return Violation("tree.dead_node", f"node {node.id} is on neither device nor host")
        if write_through and node.host_value is not None and node.parent is not root \
                and node.parent.host_value is None:
            return Violation("tree.backup_contiguity",
                             f"node {node.id} is backed up but its parent {node.parent.id} is not")
    return None


def check_slots(target, nodes, requests, values=None):
    """Device pages: tree nodes + requests' own rows + the allocator's free list (+ injected
    holds) are disjoint and cover pages 1..num_pages (page 0 is SGLang's padding page).

    Checked in a few batched tensor ops; only when those see a page owned twice or a page of
    1..num_pages unowned does the owner-by-owner walk run, to name the owners as it always has.
    `values`: these nodes' NodeValues, when the caller shares one join with the content check."""
    try:
        if _slots_ok_batched(target, nodes, requests, values):
            return None
    except Exception:  # noqa: BLE001 - the walk below reports it as it always did
        pass
    return _check_slots_by_owner(target, nodes, requests)


def _slots_ok_batched(target, nodes, requests, values=None):
    """True when the owners' pages (each owner's pages counted once, as _pages does; the free
    lists' entries each once) hold no page twice and cover 1..num_pages.

    One sort of (page, owner) keys, each free-list entry an owner of its own: equal keys are one
    owner's slots of one page (counted once); two different keys of one page are two owners.
    A node with an empty value owns no page, so only nodes with slots are owners (NodeValues)."""
    ps = target.cfg.page_size
    rtp = target.req_to_token_pool
    alloc = target.allocator
    free = [alloc.free_pages] + ([alloc.release_pages] if getattr(alloc, "release_pages", None) is not None else [])
    with torch._C.DisableTorchFunction():
        # slots of the tree's nodes, the requests' own rows, injected holds: one owner each
        node_slots, node_lengths = (values or NodeValues(nodes)).joined()
        rows = rtp.req_to_token.as_subclass(torch.Tensor)
        others = [rows[req.req_pool_idx, req.cache_protected_len: req.kv_allocated_len]
                  for req in requests if req.req_pool_idx is not None]
        others += [held for held in target.held_device if held is not None]
        owned = ([node_slots] if node_lengths else []) + others
        # (free lists hold page ids when ps > 1, slot ids (= pages) when ps == 1)
        frees = [_as_int64(t.as_subclass(torch.Tensor).reshape(-1)) for t in free]
        k = len(node_lengths) + len(others)
        n_free = sum(int(f.shape[0]) for f in frees)
        m = k + n_free  # owner ids: 0..k-1 the owners above, k.. one per free-list entry
        pages, owner = [], []
        if owned:
            lengths = torch.tensor(node_lengths + [o.numel() for o in others], dtype=torch.int64)
            # (1-D index tensors: a cat of anything else raises, and the walk reports)
            pages.append(torch.div(_as_int64(torch.cat(owned)), ps, rounding_mode="floor"))
            owner.append(torch.repeat_interleave(torch.arange(k, dtype=torch.int64), lengths))
        if n_free:
            pages += frees
            owner.append(torch.arange(k, m, dtype=torch.int64))
        if not pages:
            return target.cfg.device_tokens // ps == 0
        keys = torch.sort(torch.cat(pages) * m + torch.cat(owner)).values
        page = torch.div(keys, m, rounding_mode="floor")
        first = torch.ones(keys.shape, dtype=torch.bool)  # the first of each run of equal keys
        first[1:] = keys[1:] != keys[:-1]
        if bool((first[1:] & (page[1:] == page[:-1])).any()):
            return False  # one page, two owners
        num_pages = target.cfg.device_tokens // ps
        return int((first & (page >= 1) & (page <= num_pages)).sum()) == num_pages


def _check_slots_by_owner(target, nodes, requests):
    ps = target.cfg.page_size
    owner = {}

    def claim(pages, who):
        for p in pages:
            if p in owner:
                return Violation("slots.device_ownership", f"device page {p} owned by {owner[p]} and {who}")
            owner[p] = who
        return None

    for node in nodes:
        v = claim(_pages(node.value, ps), f"node {node.id}")
        if v:
            return v
    rtp = target.req_to_token_pool
    for req in requests:
        if req.req_pool_idx is None:
            continue
        row = rtp.req_to_token[req.req_pool_idx, req.cache_protected_len: req.kv_allocated_len]
        v = claim(_pages(row, ps), f"request {req.rid}")
        if v:
            return v
    alloc = target.allocator
    free = [alloc.free_pages] + ([alloc.release_pages] if getattr(alloc, "release_pages", None) is not None else [])
    for t in free:
        with torch._C.DisableTorchFunction():
            pages = t.as_subclass(torch.Tensor).tolist() if ps > 1 else \
                torch.div(t.as_subclass(torch.Tensor), ps, rounding_mode="floor").tolist()
        for p in pages:
            if p in owner:
                return Violation("slots.device_ownership", f"device page {p} is free and owned by {owner[p]}")
            owner[p] = "free list"
    for held in target.held_device:
        v = claim(_pages(held, ps), "an injected hold")
        if v:
            return v
    num_pages = target.cfg.device_tokens // ps
    missing = [p for p in range(1, num_pages + 1) if p not in owner]
    if missing:
        return Violation("slots.conservation", f"{len(missing)} device pages have no owner (leaked): "
                                               f"{missing[:8]}")
    return None


# ---- content ---------------------------------------------------------------------------------

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


def check_quiescent(target, requests, prefetching=None):
    cache, cc = target.cache, target.controller
    if requests:
        return Violation("quiescence", f"{len(requests)} requests still hold cache state: "
                                       f"{sorted(r.rid for r in requests)[:5]}")
    if target.storage is not None:
        for name in ("prefetch_queue", "prefetch_buffer", "backup_queue", "prefetch_revoke_queue",
                     "prefetch_hit_queue", "ack_backup_queue", "host_mem_release_queue"):
            q = getattr(cc, name, None)
            if q is not None and q.qsize():
                return Violation("quiescence", f"HiCacheController.{name} still holds {q.qsize()} entries "
                                               "(the storage tier is not idle)")
    for node in walk(cache.root_node):
        if node.lock_ref:
            return Violation("quiescence", f"node {node.id} still locked (lock_ref {node.lock_ref})")
        if getattr(node, "host_ref_counter", 0):
            return Violation("quiescence", f"node {node.id} still host-protected "
                                           f"(host_ref_counter {node.host_ref_counter})")
    if cc is not None:
        for name in ("ongoing_write_through", "ongoing_load_back", "ongoing_prefetch", "ongoing_backup"):
            pending = getattr(cache, name, None)
            if pending:
                return Violation("quiescence", f"HiRadixCache.{name} still holds {len(pending)} entries")
        for name in ("write_queue", "load_queue", "ack_write_queue", "ack_load_queue"):
            if getattr(cc, name, None):
                return Violation("quiescence", f"HiCacheController.{name} still holds "
                                               f"{len(getattr(cc, name))} entries")
    for s in target.device.streams:
        if s.queue:
            return Violation("quiescence", f"{s.name} still has {len(s.queue)} queued ops")
    return None


# ---- storage tier ----------------------------------------------------------------------------

def check_prefetch_liveness(target, allocs):
    """prefetch.abandoned_with_free_memory (DESIGN.md §4.7, docs/invariants.md): no prefetch is
    given up, nor shrunk below what fits, while at least the prefetch threshold's worth of whole
    host pages is free. `allocs` is this call's host-allocation log (HostAllocLog): per prefetch
    (rid), the first request is what it wanted; if it ends the call with no host memory after a
    failed allocation, the free whole pages at the last failure must be under the threshold; if
    it got memory, it got at least min(wanted, the whole pages free when it allocated)."""
    if target.storage is None or not allocs:
        return None
    ps = target.cfg.page_size
    threshold = max(int(target.cfg.prefetch_threshold_tokens), ps)
    by_rid = {}
    for rid, need, available, got in allocs:
        if rid is not None:
            by_rid.setdefault(rid, []).append((need, available, got))
    for rid, seq in by_rid.items():
        info = target.cache.ongoing_prefetch.get(rid)
        op = info[-1] if info else None
        held = 0 if op is None or op.host_indices is None else len(op.host_indices)
        wanted = seq[0][0]
        if wanted == 0:
            # Nothing to fetch (a prompt shorter than a page, prefetch threshold 0): SGLang asks
            # the host pool for 0 tokens, gets None and drops the prefetch, which abandons nothing.
            continue
        if held == 0:
            failed = [e for e in seq if e[2] == 0]
            if failed:
                free = failed[-1][1] - failed[-1][1] % ps
                if free >= threshold:
                    return Violation("prefetch.abandoned_with_free_memory",
                                     f"the prefetch of request {rid} ({wanted} tokens) was given up after a "
                                     f"host allocation failed while {free} tokens of whole host pages were "
                                     f"free (threshold {threshold})")
            continue
        ok = [e for e in seq if e[2] > 0]
        if ok:
            need, available, got = ok[-1]
            fits = min(wanted, available - available % ps)
            if got < fits:
                return Violation("prefetch.abandoned_with_free_memory",
                                 f"the prefetch of request {rid} got {got} host tokens of the {wanted} it "
                                 f"wanted while {available - available % ps} were free in whole pages")
    return None


def _page_hashes(target, tokens, prior):
    """The era's storage keys of `tokens` (whole pages), chained from `prior`: SGLang's own
    get_hash_str (SHA-256 of the tokens after the prior hash, a pure function), asked once per
    (function, tokens, prior, page size) and remembered (_PAGE_HASH_MEMO)."""
    utils = target.mods["sglang.srt.mem_cache.utils"]
    fn = utils.get_hash_str
    ps = target.cfg.page_size
    tokens = tuple(tokens)
    key = (fn, tokens, prior, ps)
    got = _PAGE_HASH_MEMO.get(key)
    if got is None:
        if len(_PAGE_HASH_MEMO) >= _HASH_MEMO_CAP:
            _PAGE_HASH_MEMO.clear()
        got = _PAGE_HASH_MEMO[key] = tuple(_page_hashes_uncached(fn, tokens, prior, ps))
    return list(got)


_PAGE_HASH_MEMO = {}
_TAKES_PAGE_SIZE = {}  # get_hash_str -> whether it hashes whole pages itself (page_size=)


def _page_hashes_uncached(fn, tokens, prior, ps):
    takes = _TAKES_PAGE_SIZE.get(fn)
    if takes is None:
        import inspect  # noqa: PLC0415
        takes = _TAKES_PAGE_SIZE[fn] = "page_size" in inspect.signature(fn).parameters
    if takes:
        return list(fn(list(tokens), prior, page_size=ps))
    out = []
    for i in range(0, len(tokens) - len(tokens) % ps, ps):
        prior = fn(list(tokens[i:i + ps]), prior)
        out.append(prior)
    return out


def check_storage_keys(target, nodes):
    """storage.keys: a node's page hashes (its storage keys) are the hash chain of its tokens from
    its parent's last page hash: one per page (SGLang's prefetch and backup address storage by
    them, so a wrong one reads or overwrites another prefix's page)."""
    if target.storage is None:
        return None
    ps = target.cfg.page_size
    root = target.cache.root_node
    for node in nodes:
        hv = node.hash_value
        if hv is None or (node.parent is not root and node.parent.hash_value is None):
            continue
        n = len(node.key)
        if len(hv) != n // ps:
            return Violation("storage.keys", f"node {node.id} holds {len(hv)} page hashes for {n} tokens "
                                             f"(page size {ps})")
        prior = node.parent.hash_value[-1] if node.parent is not root and node.parent.hash_value else None
        want = _page_hashes(target, list(node.key.token_ids)[:n], prior)
        if list(hv) != want:
            bad = next(i for i, (a, b) in enumerate(zip(hv, want)) if a != b)
            return Violation("storage.keys", f"node {node.id} page {bad}: hash {str(hv[bad])[:16]}... is not "
                                             f"the chain of its tokens ({str(want[bad])[:16]}...)")
    return None


def check_storage_content(target, nodes):
    """storage.content: each page kvsim's memory store holds under a node's page hash equals that
    node's host page (checked against the content function by check_content_full), so a prefetch
    of it brings the right prefix's bytes. Pages the store itself would reject (torn) are skipped."""
    backend = target.storage_backend
    cc = target.controller
    if backend is None or not hasattr(backend, "pages") or cc.write_queue or cc.write_stream.queue:
        return None
    ps = target.cfg.page_size
    hp = target.host_pool
    pages = backend.pages
    for node in nodes:
        hashes, host_value = node.hash_value, node.host_value
        if hashes is None or host_value is None:
            continue
        starts = None  # host_value[i * ps] of each page i, read at once when all are in range
        for i, key in enumerate(hashes):
            entry = pages.get(key)
            if entry is None or entry[0].numel() != entry[1]:
                continue
            with torch._C.DisableTorchFunction():
                if starts is None:
                    hv = host_value.as_subclass(torch.Tensor) if isinstance(host_value, torch.Tensor) else None
                    starts = hv[::ps].tolist() if hv is not None and hv.dim() == 1 and hv.dtype in _INT_DTYPES \
                        and (len(hashes) - 1) * ps < hv.shape[0] else False
                start = starts[i] if starts else int(host_value[i * ps])
                host = hp.get_data_page(start, flat=True) \
                    .as_subclass(torch.Tensor).reshape(-1)
                stored = entry[0].as_subclass(torch.Tensor).reshape(-1)
                if stored.dtype != host.dtype:
                    stored = _TB_TO(stored, host.dtype)
            if not torch.equal(host, stored):
                return Violation("storage.content", f"node {node.id} page {i}: the store's page under its hash "
                                                    "differs from the node's host page")
    return None
