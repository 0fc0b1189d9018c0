"""The eviction amount before an allocation, probed from the loaded SGLang revision's own
evict_from_tree_cache (eviction_amounts.py): the whole ask in April-May 2026, the shortfall at the
August snapshot. kvsim's differential runs kvsim's core with the same amount."""

import pytest
from sglang_src import driver, fresh_process_state  # noqa: F401


@pytest.mark.parametrize("tag,amount", [("sglang-21835fb0af", "whole"), ("sglang-e4378ff37f", "whole"),
                                        ("sglang-6ed5780c4f", "shortfall")])
def test_hello_reports_what_eviction_before_an_allocation_asks(tag, amount):
    d = driver(tag)
    r = d.handle({"call": "hello", "protocol": 1, "scenario": {"cache": {}}, "seed": 1})
    assert r["ok"], r
    assert r["sglang"]["capabilities"]["evict_before_alloc"] == amount
    d.close()


def test_a_helper_the_stand_ins_cannot_run_is_unknown():
    from kvsim.sglang_target.eviction_amounts import evict_before_alloc

    class Common:
        @staticmethod
        def evict_from_tree_cache(tree_cache, num_tokens):
            raise AttributeError("needs the runtime")

    assert evict_before_alloc({"sglang.srt.mem_cache.common": Common}) is None
