"""sglang.srt.session.streaming_session for the SGLang target: UnifiedRadixCache embeds a
StreamingSession and asks it first on every call; with no streaming session open (kvsim opens
none) SGLang's own session falls through on every call, which is what this one does: each try_*
answers "not mine" (None / False) and the held-size queries answer zero."""


class StreamingSession:
    def __init__(self, inner=None, **_kw):
        self.inner = inner
        self.slots = {}

    def try_match_prefix(self, *_a, **_k):
        return None

    def try_inc_lock_ref(self, *_a, **_k):
        return None

    def try_dec_lock_ref(self, *_a, **_k):
        return None

    def try_cache_finished_req(self, *_a, **_k):
        return False

    def try_cache_unfinished_req(self, *_a, **_k):
        return False

    def any_holding_kv(self, *_a, **_k):
        return False

    def release_session(self, *_a, **_k):
        return None

    def _zero(self, *_a, **_k):
        return 0

    session_held_tokens = session_held_full_tokens = session_held_swa_tokens = _zero
    session_held_req_count = session_held_mamba_slots = _zero
