"""Checks on SGLang's cache state after a driver call, named as kvsim's invariants are
(docs/invariants.md). Each returns None or a Violation (invariant, detail).

The tree walk is O(nodes); the content walk (content_checks.py) reads every cached node's device
and host bytes and is the expensive one (the driver runs it every `content_every` calls and at
quiescence)."""

import torch

from kvsim.fakecuda.tensor import DeviceTensor
# The checks' vocabulary and the content walk live beside this file; they are named here too,
# as the driver, the hybrid checks and the tests have always reached them (checks.walk, ...).
from kvsim.sglang_target.check_base import (  # noqa: F401
    _INT_DTYPES, _TB_TO, NodeValues, Violation, _as_int64, extra_key_of_ns, ns_of_extra_key, walk)
from kvsim.sglang_target.content_checks import (  # noqa: F401
    _HASH_MEMO_CAP, _content_full_batched, _content_full_by_node, _node_hashes, check_content_full,
    compare, read_device_kv, read_host_kv)


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
