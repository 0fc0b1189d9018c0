"""kvsim.sglang against SGLang's documented RadixCache contract (own tests; SGLang stand-in)."""

import hashlib
import importlib
from array import array

import numpy as np
import pytest
from sglang.srt.disaggregation.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from sglang.srt.mem_cache import base_prefix_cache as bpc
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang_fakes import FakeAllocator, FakeReq, FakeReqToTokenPool

import kvsim
import kvsim.sglang as ks
from kvsim.sglang import KvsimRadixCache


def key(tokens, extra=None, limit=None):
    return RadixKey(array("q", tokens), extra, limit=limit)


def as_list(x):
    return np.asarray(x).tolist()


def make(page_size=1, events=False, size=1000, policy="lru"):
    alloc = FakeAllocator(size)
    cache = KvsimRadixCache.create_simulated(
        mock_allocator=alloc, page_size=page_size, enable_kv_cache_events=events, eviction_policy=policy
    )
    return cache, alloc


def test_is_a_base_prefix_cache_and_import_is_lazy():
    assert issubclass(KvsimRadixCache, bpc.BasePrefixCache)
    # kvsim.sglang itself imports nothing from SGLang until the class is asked for
    src = open(ks.__file__).read()
    top = src.split("def _build_class")[0]
    assert "from sglang" not in top and "import sglang" not in top


def test_match_returns_int64_indices_and_root_on_miss():
    cache, _ = make()
    r = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3])))
    assert len(r.device_indices) == 0 and r.last_device_node is cache.root_node
    assert r.last_host_node is r.last_device_node is r.best_match_node
    cache.insert(bpc.InsertParams(key=key([1, 2, 3]), value=np.array([10, 20, 30])))
    r = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3, 4])))
    assert as_list(r.device_indices) == [10, 20, 30]
    assert str(r.device_indices.dtype).endswith("int64")


def test_value_none_means_tokens_are_the_value():
    cache, _ = make()
    res = cache.insert(bpc.InsertParams(key=key([4, 5, 6]), value=None))
    assert res.prefix_len == 0 and cache.total_size() == 3
    assert as_list(cache.match_prefix(bpc.MatchPrefixParams(key=key([4, 5, 6]))).device_indices) == [4, 5, 6]


def test_insert_reports_the_cached_prefix():
    cache, _ = make(page_size=2)
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=np.arange(4)))
    res = cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4, 5, 6, 7]), value=np.arange(10, 17)))
    assert res.prefix_len == 4
    assert cache.total_size() == 6  # 7 tokens, page-aligned to 6
    assert as_list(cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3, 4, 5, 6]))).device_indices) == [0, 1, 2, 3, 14, 15]


def test_limit_caps_the_key():
    cache, _ = make()
    cache.insert(bpc.InsertParams(key=key([1, 2, 3]), value=None))
    r = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3], limit=2)))
    assert as_list(r.device_indices) == [1, 2]


def test_extra_key_isolates_namespaces():
    cache, _ = make()
    for extra, base in (("a", 10), ("b", 20), (None, 30)):
        cache.insert(bpc.InsertParams(key=key([1, 2], extra), value=np.array([base, base + 1])))
    for extra, base in (("a", 10), ("b", 20), (None, 30)):
        assert as_list(cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2], extra))).device_indices) == [base, base + 1]
    assert len(cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2], "zzz"))).device_indices) == 0


def test_lock_refs_move_tokens_between_evictable_and_protected():
    cache, _ = make()
    cache.insert(bpc.InsertParams(key=key([1, 2, 3]), value=None))
    node = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3]))).last_device_node
    assert cache.inc_lock_ref(node).delta == -3
    assert (cache.evictable_size(), cache.protected_size()) == (0, 3)
    assert cache.inc_lock_ref(node).delta == 0
    assert cache.dec_lock_ref(node).delta == 0
    assert cache.dec_lock_ref(node).delta == 3
    assert (cache.evictable_size(), cache.protected_size()) == (3, 0)
    with pytest.raises(kvsim.KvsimError, match="holds no lock"):
        cache.dec_lock_ref(node)


def test_lock_survives_a_split_of_the_locked_node():
    cache, _ = make()
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=None))
    node = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3, 4]))).last_device_node
    cache.inc_lock_ref(node)
    cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 9])))  # splits [1,2 | 3,4]
    assert cache.protected_size() == 4
    cache.dec_lock_ref(node)
    assert cache.protected_size() == 0 and cache.evictable_size() == 4
    assert cache.sanity_check() == []


def test_evict_frees_whole_lru_leaves_through_the_allocator():
    cache, alloc = make()
    a = alloc.alloc(4)
    b = alloc.alloc(2)
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=a))
    cache.insert(bpc.InsertParams(key=key([7, 8]), value=b))
    cache.match_prefix(bpc.MatchPrefixParams(key=key([7, 8])))  # [1,2,3,4] is now the LRU leaf
    res = cache.evict(bpc.EvictParams(num_tokens=1))
    assert res.num_tokens_evicted == 4  # the whole leaf
    assert alloc.in_use == set(b.tolist())
    assert cache.total_size() == 2
    res = cache.evict(bpc.EvictParams(num_tokens=100))
    assert res.num_tokens_evicted == 2 and alloc.in_use == set()


def test_locked_nodes_are_not_evicted_and_evicted_handles_say_so():
    cache, alloc = make()
    cache.insert(bpc.InsertParams(key=key([1, 2]), value=alloc.alloc(2)))
    cache.insert(bpc.InsertParams(key=key([3, 4]), value=alloc.alloc(2)))
    n12 = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2]))).last_device_node
    n34 = cache.match_prefix(bpc.MatchPrefixParams(key=key([3, 4]))).last_device_node
    cache.inc_lock_ref(n12)
    assert cache.evict(bpc.EvictParams(num_tokens=10)).num_tokens_evicted == 2
    assert n34.evicted and not n12.evicted
    assert n12.lock_ref == 1
    cache.dec_lock_ref(n12)


def test_handles_are_stable_objects():
    cache, _ = make()
    cache.insert(bpc.InsertParams(key=key([1, 2]), value=None))
    a = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2]))).last_device_node
    b = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3]))).last_device_node
    assert a is b
    assert a.parent is cache.root_node
    assert len(a.key) == 2 and list(a.key.token_ids) == [1, 2]
    assert as_list(a.value) == [1, 2]


def test_disabled_cache_is_inert():
    alloc = FakeAllocator(10)
    cache = KvsimRadixCache.create_simulated(disable=True, mock_allocator=alloc)
    assert cache.insert(bpc.InsertParams(key=key([1, 2]), value=None)).prefix_len == 0
    assert len(cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2]))).device_indices) == 0
    assert cache.total_size() == 0
    assert cache.evict(bpc.EvictParams(num_tokens=5)).num_tokens_evicted == 0
    assert cache.inc_lock_ref(cache.root_node).delta == 0


def test_reset_clears_everything():
    cache, alloc = make(events=True)
    cache.insert(bpc.InsertParams(key=key([1, 2, 3]), value=None))
    node = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3]))).last_device_node
    cache.inc_lock_ref(node)
    cache.reset()
    assert (cache.total_size(), cache.evictable_size(), cache.protected_size()) == (0, 0, 0)
    events = cache.take_events()
    assert isinstance(events[-1], AllBlocksCleared)


def sglang_chain(tokens, page_size):
    """SGLang's page hash chain, written out independently of kvsim.sglang.page_hashes."""
    out, prior = [], b""
    for i in range(0, len(tokens) // page_size * page_size, page_size):
        d = hashlib.sha256(prior + array("I", tokens[i : i + page_size]).tobytes()).digest()
        out.append(int.from_bytes(d[:8], "big", signed=True))
        prior = d
    return out


def test_events_store_and_remove_with_hash_chains():
    cache, alloc = make(page_size=2, events=True)
    assert [type(e) for e in cache.take_events()] == [AllBlocksCleared]
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=alloc.alloc(4)))
    cache.insert(bpc.InsertParams(key=key([1, 2, 5, 6, 7]), value=alloc.alloc(5)[:4]))
    events = cache.take_events()
    assert cache.take_events() == []
    stored = [e for e in events if isinstance(e, BlockStored)]
    chain_a = sglang_chain([1, 2, 3, 4], 2)
    chain_b = sglang_chain([1, 2, 5, 6], 2)
    assert [e.block_hashes for e in stored] == [[chain_a[0]], [chain_a[1]], [chain_b[1]]]
    assert [e.parent_block_hash for e in stored] == [None, chain_a[0], chain_a[0]]
    assert [e.token_ids for e in stored] == [[1, 2], [3, 4], [5, 6]]
    assert all(e.block_size == 2 for e in stored)
    cache.evict(bpc.EvictParams(num_tokens=6))
    removed = [e for e in cache.take_events() if isinstance(e, BlockRemoved)]
    assert sorted(h for e in removed for h in e.block_hashes) == sorted(set(chain_a + chain_b))
    # repeated content at different positions hashes differently
    c2, _ = make(page_size=2, events=True)
    c2.insert(bpc.InsertParams(key=key([1, 2, 1, 2]), value=None))
    s = [e for e in c2.take_events() if isinstance(e, BlockStored)]
    assert s[0].block_hashes != s[1].block_hashes and s[1].parent_block_hash == s[0].block_hashes[0]


def test_node_hash_values_follow_splits():
    cache, _ = make(page_size=2, events=True)
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=None))
    cache.insert(bpc.InsertParams(key=key([1, 2, 5, 6]), value=None))
    root = cache.root_node
    front = root.children[(1, 2)]
    assert len(front.hash_value) == 1 and len(front.children) == 2
    back = front.children[(3, 4)]
    assert [ks.hash_to_int64(h) for h in front.hash_value + back.hash_value] == sglang_chain([1, 2, 3, 4], 2)


def test_cache_finished_req_inserts_frees_duplicates_and_unlocks():
    cache, alloc = make(page_size=2)
    pool = FakeReqToTokenPool(4, 64)
    cache.req_to_token_pool = pool
    # request 1: 5 tokens, nothing cached
    r1 = FakeReq(0, [1, 2, 3, 4, 5])
    m = cache.match_prefix(bpc.MatchPrefixParams(key=key(r1.origin_input_ids)))
    r1.last_node = m.last_device_node
    cache.inc_lock_ref(r1.last_node)
    pool.req_to_token[0, :5] = alloc.alloc(5)
    cache.cache_finished_req(r1, kv_len_to_handle=5)
    assert cache.total_size() == 4 and len(alloc.in_use) == 4  # the unaligned tail was freed
    assert cache.protected_size() == 0
    # request 2 recomputed the same prefix into new slots: the duplicates go back
    r2 = FakeReq(1, [1, 2, 3, 4, 9, 9])
    r2.last_node = cache.root_node
    cache.inc_lock_ref(r2.last_node)
    pool.req_to_token[1, :6] = alloc.alloc(6)
    cache.cache_finished_req(r2, kv_len_to_handle=6)
    assert cache.total_size() == 6 and len(alloc.in_use) == 6
    assert cache.sanity_check() == []


def test_cache_unfinished_req_moves_the_lock_and_rewrites_the_row():
    cache, alloc = make(page_size=2)
    pool = FakeReqToTokenPool(2, 64)
    cache.req_to_token_pool = pool
    r = FakeReq(0, [1, 2, 3, 4, 5])
    r.last_node = cache.root_node
    cache.inc_lock_ref(r.last_node)
    pool.req_to_token[0, :5] = alloc.alloc(5)
    cache.cache_unfinished_req(r)
    assert r.cache_protected_len == 4
    assert cache.protected_size() == 4 and r.last_node is not cache.root_node
    assert as_list(r.prefix_indices) == as_list(pool.req_to_token[0, :5])
    r.output_ids = [6, 7]
    pool.req_to_token[0, 5:7] = alloc.alloc(2)
    cache.cache_finished_req(r, kv_len_to_handle=7)
    assert cache.protected_size() == 0 and cache.total_size() == 6
    assert alloc.in_use == set(as_list(cache.all_values_flatten()))


def test_pretty_print_lists_nodes(capsys):
    cache, _ = make()
    cache.insert(bpc.InsertParams(key=key([1, 2, 3]), value=None))
    cache.insert(bpc.InsertParams(key=key([1, 2, 4]), value=None))
    cache.pretty_print()
    out = capsys.readouterr().out
    assert "#tokens: 4" in out and "[1, 2]" in out


def test_unsupported_configurations_are_refused():
    with pytest.raises(ValueError, match="not supported"):
        make(policy="fifo")
    with pytest.raises(NotImplementedError, match="bigram"):
        cache, _ = make()
        cache.match_prefix(bpc.MatchPrefixParams(key=RadixKey(array("q", [1, 2]), None, is_bigram=True)))


def test_torch_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    cache, _ = make(page_size=2)
    cache.insert(bpc.InsertParams(key=key([1, 2, 3, 4]), value=torch.tensor([5, 6, 7, 8], dtype=torch.int32)))
    r = cache.match_prefix(bpc.MatchPrefixParams(key=key([1, 2, 3, 4])))
    assert isinstance(r.device_indices, torch.Tensor) and r.device_indices.dtype == torch.int64
    assert r.device_indices.tolist() == [5, 6, 7, 8]


def test_plugin_registers_the_kvsim_backend():
    from sglang.srt.mem_cache import registry

    import kvsim.sglang_plugin as plugin

    plugin.register()
    plugin.register()  # idempotent
    factory = registry.get_radix_cache_factory("kvsim")
    assert factory is not None

    class Ctx:
        params = ks._Params(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=None, page_size=16)
        enable_hierarchical_cache = False
        is_hybrid_swa = False
        is_hybrid_ssm = False

    cache = factory(Ctx())
    assert isinstance(cache, KvsimRadixCache) and cache.page_size == 16
    Ctx.enable_hierarchical_cache = True
    with pytest.raises(NotImplementedError, match="enable_hierarchical_cache"):
        factory(Ctx())


def test_entry_point_is_declared_in_the_plugin_group():
    from importlib.metadata import entry_points

    eps = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "kvsim"]
    assert len(eps) == 1 and eps[0].value == "kvsim.sglang_plugin:register"
    assert eps[0].load() is importlib.import_module("kvsim.sglang_plugin").register
