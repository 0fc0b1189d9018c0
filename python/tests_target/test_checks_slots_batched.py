"""checks._slots_ok_batched (one sort of (page, owner) keys) says a state is clean exactly when
the owner-by-owner walk (_check_slots_by_owner) finds nothing, on small random states: pages
owned by one or two owners, an owner holding several slots of a page, free lists with repeats,
pages missing or out of range. No SGLang needed: the check reads only the attributes set here."""

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_src import import_pure_subpackage

checks = import_pure_subpackage("kvsim.sglang_target.checks")


def _state(ps, num_pages, owners, free, release=None):
    """owners: per owner ("node" | "req" | "hold", [slots]); free: page ids (slot ids when ps 1)."""
    nodes, reqs, held, rows = [], [], [], []
    for kind, slots in owners:
        t = torch.tensor(slots, dtype=torch.int64)
        if kind == "node":
            nodes.append(SimpleNamespace(id=len(nodes) + 1, value=t))
        elif kind == "req":
            rows.append(slots)
            reqs.append(SimpleNamespace(rid=f"r{len(reqs)}", req_pool_idx=len(rows) - 1, cache_protected_len=0,
                                        kv_allocated_len=len(slots)))
        else:
            held.append(t)
    width = max([len(r) for r in rows] + [1])
    table = torch.zeros((max(len(rows), 1), width), dtype=torch.int64)
    for i, r in enumerate(rows):
        table[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
    alloc = SimpleNamespace(free_pages=torch.tensor(free, dtype=torch.int64),
                            release_pages=None if release is None else torch.tensor(release, dtype=torch.int64))
    target = SimpleNamespace(cfg=SimpleNamespace(page_size=ps, device_tokens=num_pages * ps),
                             req_to_token_pool=SimpleNamespace(req_to_token=table), allocator=alloc,
                             held_device=held)
    return target, nodes, reqs


def _agree(target, nodes, reqs):
    batched = checks._slots_ok_batched(target, nodes, reqs)
    walk = checks._check_slots_by_owner(target, nodes, reqs)
    assert batched == (walk is None), (batched, walk)
    # the driver's form: one join of the nodes' values shared with the content check; nodes
    # with no slots (an empty or no value) own no page and are left out of that join
    empty = [SimpleNamespace(id=100, value=torch.zeros(0, dtype=torch.int64)), SimpleNamespace(id=101, value=None)]
    for some in (nodes, empty + nodes, nodes[:1] + empty + nodes[1:]):
        shared = checks.NodeValues(some)
        assert checks._slots_ok_batched(target, some, reqs, shared) == batched
        assert checks.check_slots(target, some, reqs, shared) == walk
    return walk


@st.composite
def states(draw):
    ps = draw(st.sampled_from([1, 2, 4]))
    num_pages = draw(st.integers(0, 8))
    pages = list(range(1, num_pages + 1))
    perm = draw(st.permutations(pages))
    owners, free, cut = [], [], 0
    # a clean split of the pages among owners and the free list, then a few faults
    while cut < len(perm):
        n = draw(st.integers(1, len(perm) - cut))
        chunk = perm[cut:cut + n]
        cut += n
        kind = draw(st.sampled_from(["node", "req", "hold", "free"]))
        if kind == "free":
            free += chunk
        else:
            slots = [p * ps + o for p in chunk for o in range(draw(st.integers(1, ps)))]
            owners.append((kind, draw(st.permutations(slots))))
    for _ in range(draw(st.integers(0, 2))):
        fault = draw(st.sampled_from(["dup_free", "shared_page", "drop", "out_of_range", "same_owner_twice"]))
        if fault == "dup_free" and free:
            free.append(draw(st.sampled_from(free)))
        elif fault == "shared_page" and pages:
            owners.append(("node", [draw(st.sampled_from(pages)) * ps]))
        elif fault == "drop" and free:
            free.pop()
        elif fault == "out_of_range":
            owners.append(("hold", [(num_pages + 1 + draw(st.integers(0, 3))) * ps]))
        elif fault == "same_owner_twice" and owners and owners[0][1]:
            owners[0] = (owners[0][0], owners[0][1] + [owners[0][1][0]])
    return ps, num_pages, owners, free


@settings(max_examples=300, deadline=None, derandomize=True)
@given(states())
def test_batched_slots_check_is_clean_exactly_when_the_walk_is(state):
    _agree(*_state(*state))


@pytest.mark.parametrize("ps", [1, 4])
def test_the_faults_the_walk_names_are_not_passed(ps):
    # pages 1..3: node 1 holds page 1 (two slots), a request page 2, the free list page 3
    clean = [("node", [1 * ps, 1 * ps + (ps - 1)]), ("req", [2 * ps])]
    assert _agree(*_state(ps, 3, clean, [3])) is None
    v = _agree(*_state(ps, 3, clean + [("hold", [2 * ps])], [3]))  # page 2 held and the request's
    assert v.invariant == "slots.device_ownership"
    v = _agree(*_state(ps, 3, clean, [3, 3]))  # page 3 free twice
    assert v.invariant == "slots.device_ownership"
    v = _agree(*_state(ps, 3, clean, []))  # page 3 leaked
    assert v.invariant == "slots.conservation"
    v = _agree(*_state(ps, 3, clean, [3], release=[1]))  # page 1 released while node 1 holds it
    assert v.invariant == "slots.device_ownership"
