"""Checks on PD decode's state: the metadata every live request received (running or offloaded)
and the sparse index of every running request. Named as kvsim's core names them
(docs/invariants.md: metadata.isolation; content for the index bytes)."""

import torch

from kvsim.sglang_target.checks import Violation
from kvsim.sglang_target.metadata import _rid_seed
from kvsim.sglang_target.retract_pool import check_index


def _span(t):
    """[start, end) bytes of a CPU or fake-device tensor's data."""
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


def check_metadata(pd):
    """A live request's metadata is what its prefill sent, for as long as it lives: it equals
    its values when received, names the request (bootstrap_room, which SGLang itself compares),
    and shares no memory with another live request's (a slot freed and reused by another
    request must not change it)."""
    spans = []
    for rid, (got, then) in sorted(pd.received.items()):
        for field, (now, was) in enumerate(zip(got, then)):
            if now is None:
                continue
            if not torch.equal(now, was):
                return Violation("metadata.isolation",
                                 f"request {rid}'s metadata field {field} changed after it was received "
                                 "(the slot it was read from was freed and reused, and the request's copy "
                                 "changed with it)")
            if now.numel():
                spans.append((_span(now), rid, field))
        room = got[-1]
        if room is not None and int(room.reshape(-1)[0]) & 0xFFFFFFFF != _rid_seed(rid):
            return Violation("metadata.isolation", f"request {rid}'s bootstrap_room is another request's")
    spans.sort()
    reach = None  # the span reaching furthest so far: (end, rid, field)
    for (start, end), rid, field in spans:
        if reach is not None and start < reach[0] and reach[1] != rid:
            return Violation("metadata.shared",
                             f"requests {reach[1]} and {rid} hold metadata in the same memory (fields "
                             f"{reach[2]} and {field}): a live request's metadata is a view of a reused slot")
        if reach is None or end > reach[0]:
            reach = (end, rid, field)
    return None


def check_index_of(target, req, hashes, what):
    """The sparse index bytes of the request's computed positions equal the content function."""
    n = req.computed
    if n == 0:
        return None
    slots = target.req_to_token_pool.req_to_token[req.req_pool_idx, :n].to(torch.int64)
    detail = check_index(target.kv_pool, slots, hashes[:n], what)
    return None if detail is None else Violation("content", detail)
