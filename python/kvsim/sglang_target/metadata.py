"""PD decode's metadata through SGLang's own `MetadataBuffers` and `ReqToMetadataIdxAllocator`
(disaggregation/utils.py): the prefill side publishes a request's first-output-token metadata
into a slot with `set_buf`; the decode side reads it with `get_buf` when the transfer is done and
frees the slot at once (SGLang's pop_transferred), keeping what get_buf returned (the hidden
states and top-k tensors go to the request as they are).

What the prefill sends is a pure function of the request id (`PrefillReq`), so the decode side's
copy can be checked against it for as long as the request lives."""

import inspect
import zlib

import torch

HIDDEN_SIZE = 8
TOPK = 4


def _rid_seed(rid):
    return zlib.crc32(str(rid).encode())


class PrefillReq:
    """The attributes of SGLang's Req that MetadataBuffers.set_buf reads (April-August 2026), as
    the prefill instance holds them after its forward. Attributes an era reads that are not set
    here are None (no logprobs, no sampling mask, no multimodal inputs)."""

    def __init__(self, rid, prompt_len, slot):
        s = _rid_seed(rid)
        self.metadata_buffer_index = slot
        self.output_ids = [s % 50000]
        self.cached_tokens = prompt_len
        self.cached_tokens_device = s % (prompt_len + 1)
        self.cached_tokens_host = 0
        self.cached_tokens_storage = 0
        self.return_logprob = False
        self.return_sampling_mask = False
        self.multimodal_inputs = None
        g = torch.Generator().manual_seed(s)
        self.hidden_states_tensor = torch.randint(0, 1 << 20, (HIDDEN_SIZE,), generator=g).to(torch.float32)
        self.output_topk_p = torch.randint(0, 1 << 20, (TOPK,), generator=g).to(torch.float32)
        self.output_topk_index = torch.randint(0, 50000, (TOPK,), generator=g)
        self.bootstrap_room = s

    def __getattr__(self, name):  # only for names not set above
        return None


class PdMetadata:
    """SGLang's MetadataBuffers (slots: the scenario's scheduler.metadata_slots) and its slot
    allocator, and the metadata each live request received."""

    def __init__(self, mods, slots):
        utils = mods["sglang.srt.disaggregation.utils"]
        cls = getattr(utils, "MetadataBuffers", None)
        alloc_cls = getattr(utils, "ReqToMetadataIdxAllocator", None)
        if cls is None or alloc_cls is None:
            raise RuntimeError("this SGLang tree's disaggregation/utils.py has no MetadataBuffers / "
                               "ReqToMetadataIdxAllocator")
        kwargs = dict(size=slots, hidden_size=HIDDEN_SIZE, hidden_states_dtype=torch.float32)
        if "max_sampling_mask_tokens" in inspect.signature(cls.__init__).parameters:
            kwargs["max_sampling_mask_tokens"] = 0  # no sampling masks (SGLang's env default)
        self.buffers = cls(**kwargs)
        self.allocator = alloc_cls(slots)
        self.received = {}  # rid -> (what get_buf returned, a copy of its values then)

    def can_receive(self):
        return self.allocator.available_size() > 0

    def receive(self, rid, prompt_len):
        """The transfer of `rid` completes: set_buf on the prefill side, get_buf and free on the
        decode side. False when no slot is free."""
        slot = self.allocator.alloc()
        if slot is None:
            return False
        self.buffers.set_buf(PrefillReq(rid, prompt_len, slot))
        got = self.buffers.get_buf(slot)
        self.allocator.free(slot)
        self.received[str(rid)] = (got, tuple(None if x is None else x.clone() for x in got))
        return True

    def keep_only(self, live):
        """Forgets the metadata of requests that are no longer live (finished or aborted)."""
        for rid in [r for r in self.received if r not in live]:
            del self.received[rid]
