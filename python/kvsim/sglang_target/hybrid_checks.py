"""Checks on SGLang's UnifiedRadixCache state (the hybrid target, hybrid.py), after every call the
scenario's check.full_every schedules, and at quiescence. Each is a law of any correct hybrid
cache, not of one revision:

- residency: every component's device value on the device, every host value (the FULL KV host
  indices, the SWA host indices, the Mamba host slots) on the host; the same for the index
  tensors of every PoolTransfer the tree or its queued operations hold;
- component locks: a component's lock only on a node that holds that component's device value
  (a lock on an evicted node protects nothing and unbalances the evictable / protected sizes);
- sizes: every component's evictable and protected sizes equal their recount over the tree (the
  device values' tokens, split by whether the component's lock is held);
- content: every FULL and SWA device and host value holds the bytes of its prefix (the content oracle; the SWA layers have their own bytes, hybrid.expected_swa_kv);
- quiescence: no component lock or host lock left, no pending write / load, no queued stream op.

The load-back anchor law (every component's match validator accepts the node a load-back starts
from) is checked where the anchor is chosen: HybridTarget.init_load_back; the lock-coverage law
(the node a request locks at admission lies as deep as the prefix it reuses, so every node of
that prefix is protected from eviction while the request reads it) where it is taken:
HybridTarget.lock_request."""

import torch

from kvsim.sglang_target import checks
from kvsim.sglang_target.checks import Violation


def _is_device(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cuda"


def _components(target):
    return list(target.cache.tree_components)


def _node(target, handle):
    """The tree node for a handle: a node, or (August 2026 tree) a NodeId (unified_tree.py)."""
    tree = getattr(target, "tree", None)
    return handle if tree is None else tree.node(handle)


def _sizes(target):
    """({ct: evictable}, {ct: protected}) as the tree keeps them (the cache's or its tree core's)."""
    tree = getattr(target, "tree", None)
    cache = target.cache
    return tree.sizes() if tree is not None else (cache.component_evictable_size_,
                                                  cache.component_protected_size_)


def _residency_of(what, value, host):
    if value is None or not isinstance(value, torch.Tensor):
        return None
    if host and _is_device(value):
        return Violation("residency.host_index_on_device", f"{what} is a device tensor ({value.device}); "
                                                           "host indices must stay on the host")
    if not host and not _is_device(value):
        return Violation("residency.device_index_on_host", f"{what} is a host tensor; device indices "
                                                           "must be on the device")
    return None


def check_residency(target, nodes):
    for node in nodes:
        for ct in _components(target):
            cd = node.component_data[ct]
            v = _residency_of(f"node {node.id} {ct} device value", cd.value, host=False) or \
                _residency_of(f"node {node.id} {ct} host value", cd.host_value, host=True)
            if v:
                return v
    cc = target.controller
    for qname in ("write_queue", "load_queue"):
        for op in getattr(cc, qname, None) or []:
            for tr in getattr(op, "pool_transfers", None) or []:
                v = _residency_of(f"queued {qname} PoolTransfer {tr.name} host_indices", tr.host_indices,
                                  host=True)
                if v:
                    return v
    return None


def check_component_locks(target, nodes):
    for node in nodes:
        for ct in _components(target):
            cd = node.component_data[ct]
            if cd.lock_ref < 0 or cd.host_lock_ref < 0:
                return Violation("lock.negative", f"node {node.id} {ct}: lock_ref {cd.lock_ref}, "
                                                  f"host_lock_ref {cd.host_lock_ref}")
            if cd.lock_ref > 0 and cd.value is None:
                return Violation("lock.on_evicted", f"node {node.id} {ct}: lock_ref {cd.lock_ref} on a node "
                                                    f"without a device value (host value "
                                                    f"{'present' if cd.host_value is not None else 'absent'})")
    return None


def check_sizes(target, nodes):
    """Each component's evictable / protected token counts against their recount."""
    cache = target.cache
    for ct in _components(target):
        evictable = protected = 0
        for node in nodes:
            if node is cache.root_node:
                continue
            cd = node.component_data[ct]
            if cd.value is not None:
                if cd.lock_ref > 0:
                    protected += len(cd.value)
                else:
                    evictable += len(cd.value)
        kept_evictable, kept_protected = _sizes(target)
        kept = (int(kept_evictable[ct]), int(kept_protected[ct]))
        if kept != (evictable, protected):
            return Violation("sizes.component", f"{ct}: evictable {kept[0]}, protected {kept[1]}; the "
                                                f"tree's device values recount to {evictable}, {protected}")
    return None


def _read_swa_kv(target, swa_slots):
    pool = target.swa_kv_pool
    idx = swa_slots.to(torch.int64)
    idx = idx if _is_device(idx) else idx.to("cuda")
    return (torch.stack([pool.k_buffer[i][idx].cpu() for i in range(target.cfg.layer_count)]),
            torch.stack([pool.v_buffer[i][idx].cpu() for i in range(target.cfg.layer_count)]))


def check_content(target, nodes):
    """FULL and SWA component bytes on device and host equal the content oracle's. Batched: one read and one comparison per kind of value; a difference is then
    named by its node."""
    t = target
    cc = t.controller
    full = t.component_types.FULL
    swa = t.component_types.SWA if t.kind == "swa" else None
    check_device = not cc.load_queue and not cc.load_stream.queue
    check_host = not cc.write_queue and not cc.write_stream.queue
    kinds = {"device KV": [], "host KV": [], "device SWA KV": [], "host SWA KV": []}  # -> [(node, slots, base)]
    root = t.cache.root_node
    stack = [(c, None, 0) for c in reversed(list(root.children.values()))]
    while stack:
        node, seed, depth = stack.pop()
        tokens = list(node.key.token_ids)[: len(node.key)]
        hashes, base = checks._node_hashes(checks.ns_of_extra_key(node.key.extra_key), seed, depth, tokens)
        cd = node.component_data[full]
        if check_device and cd.value is not None and len(cd.value):
            kinds["device KV"].append((node, cd.value, base))
        if check_host and cd.host_value is not None and len(cd.host_value) and not _is_device(cd.host_value):
            kinds["host KV"].append((node, cd.host_value, base))
        sd = node.component_data[swa] if swa is not None else None
        if check_device and sd is not None and sd.value is not None and len(sd.value):
            kinds["device SWA KV"].append((node, sd.value, base))
        if check_host and sd is not None and sd.host_value is not None and len(sd.host_value) and \
                not _is_device(sd.host_value):
            kinds["host SWA KV"].append((node, sd.host_value, base))
        last = hashes[-1] if hashes else seed
        for c in reversed(list(node.children.values())):
            stack.append((c, last, depth + len(tokens)))
    for name, items in kinds.items():
        if items:
            v = _compare_batch(t, name, items)
            if v:
                return v
    return None


def _read(target, name, slots):
    if name == "device KV":
        return checks.read_device_kv(target, slots)
    if name == "host KV":
        return checks.read_host_kv(target, slots)
    if name == "host SWA KV":  # SGLang's SWA host pool is a KV host pool of the SWA layers
        swa_host = target.cache.components[target.component_types.SWA]._swa_kv_pool_host
        return checks.read_host_kv(_HostPoolView(swa_host, target.cfg), slots)
    return _read_swa_kv(target, slots)


class _HostPoolView:
    """What checks.read_host_kv reads of a target: its host pool and config."""

    def __init__(self, host_pool, cfg):
        self.host_pool = host_pool
        self.cfg = cfg


def _expected(target, name, base):
    from kvsim.sglang_target.content import expected_kv_of_base  # noqa: PLC0415
    lc = target.cfg.layer_count
    if name in ("device SWA KV", "host SWA KV"):
        k, v = expected_kv_of_base(base, 2 * lc, 1, target.cfg.head_dim)
        return k[lc:], v[lc:]
    return expected_kv_of_base(base, lc, 1, target.cfg.head_dim)


def _compare_batch(target, name, items):
    slots = torch.cat([s.to(torch.int64) for _, s, _ in items])
    got = _read(target, name, slots)
    want = _expected(target, name, torch.cat([b for _, _, b in items]))
    if all(torch.equal(g.reshape(w.shape), w) for g, w in zip(got, want)):
        return None
    off = 0
    for node, s, base in items:  # name the first node that differs
        n = len(base)
        for label, g, w in (("K", got[0], want[0]), ("V", got[1], want[1])):
            gs = g[:, off:off + n].reshape(w[:, off:off + n].shape)
            ws = w[:, off:off + n]
            if not torch.equal(gs, ws):
                bad = (gs != ws).reshape(ws.shape[0], ws.shape[1], -1).any(dim=2).any(dim=0).nonzero().flatten()
                return Violation("content", f"node {node.id} {name}: {label} bytes of {len(bad)} of {n} positions "
                                            f"differ from the content function (first at offset {int(bad[0])})")
        off += n
    return Violation("content", f"{name}: bytes differ from the content function")


def check_hybrid(driver, call):
    """The driver's per-call check for the hybrid target (Driver._check)."""
    t = driver.target
    if getattr(t, "mamba_tree", False):  # HiMambaRadixCache: a tree of its own (mamba.py)
        from kvsim.sglang_target.mamba_checks import check_mamba  # noqa: PLC0415
        return check_mamba(driver, call)
    return driver.run_full_checks(
        call, [lambda nodes, check=check: check(t, nodes)
               for check in (check_residency, check_component_locks, check_sizes)],
        lambda nodes: check_content(t, nodes))


def check_quiescent(target, requests):
    if getattr(target, "mamba_tree", False):
        from kvsim.sglang_target import mamba_checks  # noqa: PLC0415
        return mamba_checks.check_quiescent(target, requests)
    if requests:
        return Violation("quiescence", f"{len(requests)} requests still hold cache state: "
                                       f"{sorted(r.rid for r in requests)[:5]}")
    for node in checks.walk(target.cache.root_node):
        for ct in _components(target):
            cd = node.component_data[ct]
            if cd.lock_ref or cd.host_lock_ref:
                return Violation("quiescence", f"node {node.id} {ct} still locked (lock_ref {cd.lock_ref}, "
                                               f"host_lock_ref {cd.host_lock_ref})")
    cache, cc = target.cache, target.controller
    for name in ("ongoing_write_through", "ongoing_load_back"):
        pending = getattr(cache, name, None)
        if pending:
            return Violation("quiescence", f"UnifiedRadixCache.{name} still holds {len(pending)} entries")
    for name in ("write_queue", "load_queue", "ack_write_queue", "ack_load_queue"):
        if getattr(cc, name, None):
            return Violation("quiescence", f"HybridCacheController.{name} still holds "
                                           f"{len(getattr(cc, name))} entries")
    for s in target.device.streams:
        if s.queue:
            return Violation("quiescence", f"{s.name} still has {len(s.queue)} queued ops")
    return None


def check_lock_covers_prefix(target, req):
    """A request reuses len(req.prefix_indices) tokens of the tree and locks req.last_node: the
    locked path (root .. last_node) must hold that many tokens, or part of the prefix it reads is
    unprotected and may be evicted and reused under it."""
    depth = 0
    last = node = _node(target, req.last_node)
    while node is not None and node is not target.cache.root_node:
        depth += len(node.key)
        node = node.parent
    reused = len(req.prefix_indices)
    if depth < reused:
        return Violation("lock.prefix_uncovered",
                         f"request {req.rid} reuses {reused} tokens of the tree but locks node "
                         f"{last.id} at depth {depth}: {reused - depth} tokens of its prefix are "
                         "not protected from eviction")
    return None


def check_anchor(target, anchor):
    """The node a load-back starts from is accepted by every component's match validator (run
    from the root down to it, as match_prefix runs them): a node some component rejects may hold
    neither a device nor a host value for that component."""
    cache = target.cache
    anchor = _node(target, anchor)
    if anchor is cache.root_node:
        return None
    path = []
    node = anchor
    while node is not None and node is not cache.root_node:
        path.append(node)
        node = node.parent
    if node is None:
        return Violation("load_back.anchor_detached", f"load-back anchor node {anchor.id} is not in the tree")
    validators = [(ct, comp.create_match_validator()) for ct, comp in cache.components.items()]
    ok = {ct: False for ct, _ in validators}
    for n in reversed(path):
        for ct, val in validators:
            ok[ct] = bool(val(n))
    bad = [str(ct) for ct, good in ok.items() if not good]
    if bad:
        return Violation("load_back.anchor_not_validated",
                         f"load-back anchored on node {anchor.id}, which the {', '.join(bad)} component's "
                         "match validator rejects")
    return None
