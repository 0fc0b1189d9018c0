"""The driver's batched checks (checks.check_content_full, checks.check_slots: a few tensor ops
per check instead of a few per node) agree with the node-by-node walks they stand in for: clean
on a clean state, and on a planted fault the same violation, word for word, as the walk names."""

import pytest
import torch
from sglang_src import target
from test_driver import A, B, C, NEWEST, SEED004, SEQUENCE, first_violation, hello, lifecycle, make_driver, run


@pytest.fixture(autouse=True)
def fresh_process_state():
    target.unload()
    yield
    target.unload()


def _both(d):
    from kvsim.sglang_target import checks
    t = d.target
    nodes = checks.walk(t.cache.root_node)
    reqs = list(d.reqs.values())
    content, slots = checks.check_content_full(t), checks.check_slots(t, nodes, reqs)
    # the driver's form (one walk, one join of the nodes' values for both checks) says the same
    shared = checks.NodeValues(nodes)
    assert checks.check_slots(t, nodes, reqs, shared) == slots
    assert checks.check_content_full(t, nodes, shared) == content
    return ((content, checks._content_full_by_node(t)),
            (slots, checks._check_slots_by_owner(t, nodes, reqs)))


@pytest.mark.parametrize("tag", [NEWEST, SEED004])
def test_batched_checks_agree_with_the_walks_along_a_sequence(tag):
    d = make_driver(tag)
    try:
        hello(d)
        for call in SEQUENCE:
            run(d, [call])
            (content, content_walk), (slots, slots_walk) = _both(d)
            assert content is None and content_walk is None, (call, content_walk)
            assert slots is None and slots_walk is None, (call, slots_walk)
    finally:
        d.close()


def test_a_page_owned_twice_is_named_as_the_walk_names_it():
    d = make_driver(NEWEST)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "admit", "rid": "b", "ns": 0, "tokens": B},
                                    {"call": "compute", "rid": "b", "n": len(B), "tokens": B}])
        node = next(n for n in d.target.cache.root_node.children.values())
        alloc = d.target.allocator
        page = int(node.value[0]) // d.target.cfg.page_size
        alloc.free_pages = torch.cat([alloc.free_pages, torch.tensor([page], dtype=alloc.free_pages.dtype,
                                                                      device="cuda")])  # planted
        (_, _), (slots, slots_walk) = _both(d)
        assert slots is not None and slots == slots_walk, (slots, slots_walk)
        assert slots.invariant == "slots.device_ownership" and f"device page {page}" in slots.detail
        v = first_violation(d, [{"call": "tick", "now": 1}])
        assert v == slots.as_dict()
    finally:
        d.close()


def test_overwritten_host_bytes_are_named_as_the_walk_names_them():
    d = make_driver(SEED004)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}] + lifecycle("c", C) + [{"call": "flush"}])
        hp = d.target.host_pool
        nodes = [n for n in d.target.cache.root_node.children.values() if n.host_value is not None]
        assert nodes, "the sequence leaves a backed-up node"
        idx = nodes[-1].host_value[-1:].to(torch.int64)
        hp.v_buffer[idx] = hp.v_buffer[idx] + 1  # planted: one host position's V bytes
        (content, content_walk), _ = _both(d)
        assert content is not None and content == content_walk, (content, content_walk)
        assert content.invariant == "content" and "host KV" in content.detail
    finally:
        d.close()


def test_a_walk_that_is_not_the_trees_falls_back_to_the_node_by_node_walk():
    """The content check given walked nodes follows walk()'s order to know each node's prefix;
    a list that is not the tree's walk (a node missing) is not checked batched but walked."""
    from kvsim.sglang_target import checks
    d = make_driver(SEED004)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}] + lifecycle("c", C) + [{"call": "flush"}])
        nodes = checks.walk(d.target.cache.root_node)
        assert len(nodes) >= 2, "the sequence leaves two nodes"
        assert checks._content_full_batched(d.target, nodes)
        assert not checks._content_full_batched(d.target, nodes[:-1])
        assert checks.check_content_full(d.target, nodes[:-1]) is None  # the walk: clean
    finally:
        d.close()


@pytest.mark.parametrize("side", ["device", "host"])
def test_bytes_overwritten_after_a_clean_check_are_caught_with_the_tree_unchanged(side):
    """The batched content check keeps each node's expected bytes and reuses the previous
    check's concatenation when the nodes are the same: the bytes themselves are read again, so
    one position overwritten between two checks of the same tree is found, as the walk finds it."""
    from kvsim.sglang_target import checks
    d = make_driver(SEED004)
    try:
        hello(d)
        run(d, lifecycle("a", A) + [{"call": "flush"}])
        assert checks.check_content_full(d.target) is None  # a clean check of this tree first
        node = next(n for n in d.target.cache.root_node.children.values()
                    if (n.value if side == "device" else n.host_value) is not None)
        if side == "device":
            slot = node.value[-1:]
            buf = d.target.kv_pool.k_buffer[1]
            buf[slot] = buf[slot] + 1  # planted: layer 1's K of one device position
        else:
            idx = node.host_value[:1].to(torch.int64)
            hp = d.target.host_pool
            hp.k_buffer[idx] = hp.k_buffer[idx] + 1  # planted: one host position's K bytes
        assert not checks._content_full_batched(d.target)
        (content, content_walk), _ = _both(d)
        assert content is not None and content == content_walk, (content, content_walk)
        assert f"{side} KV" in content.detail and "K bytes" in content.detail
    finally:
        d.close()
