"""SGLang's Mamba admission for the FULL + Mamba target (mamba.py), as SGLang's own code does it
(read at the seed tags, April 2026; the same at the August snapshot):

- sizing: the model runner gives the request pool at most max_mamba_cache_size // 3 rows
  (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO with the radix cache and no Mamba extra buffer), and
  the scheduler admits no more running requests than that (get_num_allocatable_reqs), so the rest
  wait. HybridReqToTokenPool indexes its request -> Mamba map by request row in a tensor of
  mamba-size entries, so more rows than Mamba slots would be out of bounds in SGLang's own code.
- the slot: before allocating a request row, alloc_req_slots (mem_cache/common.py) asks the tree to
  evict Mamba states until 3 per request are free (MAMBA_STATE_PER_REQ_PREFIX_CACHE), then
  HybridReqToTokenPool.alloc takes one and asserts that it got it.

kvsim's driver asks can_admit before it takes anything for a request (match locks, load-back), so a
request whose Mamba slot cannot be had (free + evictable short, e.g. while write-through locks
hold states) waits as a request beyond the token budget does, instead of reaching SGLang's assert.
SGLang relies on the sizing alone there; the wait is the scheduler model's, not SGLang's cache's."""

STATES_PER_REQUEST = 3  # SGLang: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, MAMBA_STATE_PER_REQ_PREFIX_CACHE


def request_rows(max_requests, mamba_states):
    """Rows of the request pool: SGLang's min(max_num_reqs, max_mamba_cache_size // 3), at least
    one (SGLang would not start with none; a drawn pool of 1-2 Mamba states still runs one request
    at a time)."""
    if max_requests < 1 or mamba_states < 1:
        raise ValueError(f"request_rows: max_requests {max_requests} and mamba_states {mamba_states} "
                         "must be positive")
    return max(1, min(max_requests, mamba_states // STATES_PER_REQUEST))


def mamba_states_free(target, req):
    """Whether the Mamba slots an admission leads to can be had: the request's own, the fork that
    caches its prefill (cache_unfinished_req), and one more when a host hit may restore a node's
    state; free slots plus what the tree can evict, at most the pool's size (a 2-slot pool still
    runs one request)."""
    need = 2 + (1 if int(getattr(req, "host_hit_length", 0) or 0) > 0 else 0)
    if getattr(req, "mamba_pool_idx", None) is not None:
        need -= 1
    need = min(need, int(target.mamba_pool.size))
    return mamba_slots_available(target) + int(target.cache.mamba_evictable_size()) >= need


def mamba_fork_free(target):
    """Whether cache_unfinished_req's fork of a request's Mamba state can get a slot (it evicts one
    state, then asserts). Write-through locks every backed-up node's state until its ack, which
    SGLang's admission does not count, so with copies in flight all slots can be held: the driver
    then defers the prefill step (computed: false, as for a KV shortage) instead of reaching the
    assert; the acks free them."""
    return mamba_slots_available(target) + int(target.cache.mamba_evictable_size()) >= 1


def mamba_slots_available(target):
    """Free device Mamba slots as alloc_req_slots counts them: the MambaPool's (April-May 2026),
    or the request pool's mamba_allocator's schedulable count (August 2026 on)."""
    allocator = getattr(target.req_to_token_pool, "mamba_allocator", None)
    if allocator is not None:
        count = getattr(allocator, "schedulable_available_size", None) or allocator.available_size
        return int(count())
    return int(target.mamba_pool.available_size())


def evict_for_request_slot(target):
    """SGLang's alloc_req_slots for one request: evict Mamba states from the tree until
    STATES_PER_REQUEST are free (as many as it can)."""
    from kvsim.sglang_target.target import _call_with_supported  # noqa: PLC0415
    available = mamba_slots_available(target)
    if available < STATES_PER_REQUEST:
        target.cache.evict(_call_with_supported(target.bpc.EvictParams, num_tokens=0,
                                                mamba_num=STATES_PER_REQUEST - available))
