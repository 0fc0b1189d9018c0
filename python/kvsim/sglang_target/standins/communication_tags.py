"""Stand-in for sglang.srt.distributed.communication_tags: P2PTag values are only labels here
(one rank sends nothing), so any member name SGLang asks for exists."""


class _TagNames(type):
    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        # Names SGLang adds later resolve to a stable, distinct integer.
        return 1000 + int.from_bytes(name.encode()[:6], "little") % 100000


class P2PTag(metaclass=_TagNames):
    HIRADIX_PP_SYNC = 1
