"""Checks on SGLang's HiMambaRadixCache state (the FULL + Mamba target, mamba.py), after every
call the scenario's check.full_every schedules, and at quiescence. Each is a law of any correct
hierarchical Mamba cache, not of one revision:

- residency: every node's device values (value, mamba_value) on the device, its host values
  (host_value, mamba_host_value) on the host; the same for the index tensors of every
  PoolTransfer a queued write or load holds (the controller moves its own copies);
- locks: full_lock_ref >= mamba_lock_ref >= 0, no lock on a node without the device value it
  protects, host reference counts not negative;
- sizes: the full / Mamba evictable and protected sizes equal their recount over the tree;
- content: the FULL device and host KV hold the bytes of their prefix (checks' oracle);
- quiescence: no lock or host reference left, no pending write / load, no queued stream op.

Pool-transfer indices read by a queued copy without record_stream on its stream are the fake
caching allocator's to report (fakecuda/memory.py), host indices handed to a transfer kernel
the fake kernels' (fakecuda/kernels.py)."""

import torch

from kvsim.sglang_target import checks
from kvsim.sglang_target.checks import Violation


def _is_device(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cuda"


def _residency(what, value, host):
    if not isinstance(value, torch.Tensor):
        return None
    if host and _is_device(value):
        return Violation("residency.host_index_on_device",
                         f"{what} is a device tensor ({value.device}); host indices must stay on the host")
    if not host and not _is_device(value):
        return Violation("residency.device_index_on_host",
                         f"{what} is a host tensor; device indices must be on the device")
    return None


def check_residency(target, nodes):
    for node in nodes:
        for name, host in (("value", False), ("host_value", True), ("mamba_value", False),
                           ("mamba_host_value", True)):
            v = _residency(f"node {node.id} {name}", getattr(node, name, None), host)
            if v:
                return v
    cc = target.controller
    for qname in ("write_queue", "load_queue"):
        for op in getattr(cc, qname, None) or []:
            for tr in getattr(op, "pool_transfers", None) or []:
                v = _residency(f"queued {qname} PoolTransfer {tr.name} host_indices", tr.host_indices, True) \
                    or _residency(f"queued {qname} PoolTransfer {tr.name} device_indices", tr.device_indices,
                                  False)
                if v:
                    return v
    return None


def check_locks(target, nodes):
    for node in nodes:
        if node is target.cache.root_node:
            continue
        full, mamba = node.full_lock_ref, node.mamba_lock_ref
        if mamba < 0 or full < 0 or node.host_ref_counter < 0 or node.host_mamba_ref_counter < 0:
            return Violation("lock.negative", f"node {node.id}: full_lock_ref {full}, mamba_lock_ref {mamba}, "
                                              f"host refs {node.host_ref_counter} / {node.host_mamba_ref_counter}")
        if full > 0 and node.value is None:
            return Violation("lock.on_evicted", f"node {node.id}: full_lock_ref {full} on a node without device KV")
        if mamba > 0 and node.mamba_value is None:
            return Violation("lock.on_evicted", f"node {node.id}: mamba_lock_ref {mamba} on a node without a "
                                                "device Mamba state")
    return None


def check_sizes(target, nodes):
    cache = target.cache
    count = {"full": [0, 0], "mamba": [0, 0]}
    for node in nodes:
        if node is cache.root_node:
            continue
        if node.value is not None:
            count["full"][node.full_lock_ref > 0] += len(node.value)
        if node.mamba_value is not None:
            count["mamba"][node.mamba_lock_ref > 0] += len(node.mamba_value)
    for kind in ("full", "mamba"):
        kept = (int(getattr(cache, f"{kind}_evictable_size_")), int(getattr(cache, f"{kind}_protected_size_")))
        if kept != tuple(count[kind]):
            return Violation("sizes.component", f"{kind}: evictable {kept[0]}, protected {kept[1]}; the tree's "
                                                f"device values recount to {count[kind][0]}, {count[kind][1]}")
    return None


def check_mamba(driver, call):
    """The driver's per-call check for the Mamba target (via hybrid_checks.check_hybrid)."""
    t = driver.target
    return driver.run_full_checks(
        call, [lambda nodes, check=check: check(t, nodes)
               for check in (check_residency, check_locks, check_sizes)],
        lambda nodes: checks.check_content_full(t))


def check_quiescent(target, requests):
    if requests:
        return Violation("quiescence", f"{len(requests)} requests still hold cache state: "
                                       f"{sorted(r.rid for r in requests)[:5]}")
    for node in checks.walk(target.cache.root_node):
        if node is target.cache.root_node:
            continue
        if node.full_lock_ref or node.mamba_lock_ref or node.host_ref_counter or node.host_mamba_ref_counter:
            return Violation("quiescence", f"node {node.id} still locked (full {node.full_lock_ref}, mamba "
                                           f"{node.mamba_lock_ref}, host {node.host_ref_counter} / "
                                           f"{node.host_mamba_ref_counter})")
    cache, cc = target.cache, target.controller
    for name in ("ongoing_write_through", "ongoing_load_back"):
        if getattr(cache, name, None):
            return Violation("quiescence", f"HiMambaRadixCache.{name} still holds {len(getattr(cache, name))} entries")
    for name in ("write_queue", "load_queue", "ack_write_queue", "ack_load_queue"):
        if getattr(cc, name, None):
            return Violation("quiescence", f"HybridCacheController.{name} still holds {len(getattr(cc, name))} entries")
    for s in target.device.streams:
        if s.queue:
            return Violation("quiescence", f"{s.name} still has {len(s.queue)} queued ops")
    return None
