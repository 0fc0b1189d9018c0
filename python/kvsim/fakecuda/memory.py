"""The caching-allocator lifetime model (PyTorch's CUDACachingAllocator semantics, see
torch.Tensor.record_stream's documentation).

Every device allocation belongs to the stream current when it was made. A block may be reused by a
later allocation on that stream as soon as its last reference dies, unless ``record_stream(s)`` added
another stream ``s`` to its uses; then reuse waits until ``s`` has passed the work queued at the
time of the free. So: a block whose last reference dies while an op queued on another stream still
reads or writes it, with no ``record_stream`` for that stream, is a use-after-free on the GPU. The
model reports it at the free (``stream_lifetime``) and poisons the memory, so that the queued op,
when the simulator runs it, reads garbage as the real kernel could.

"Last reference" is the root tensor of the storage (a view keeps its base alive, so the root dies
with the last view). Queued ops hold raw aliases of the memory that do not keep the root alive,
as a kernel launch holds pointers, not references.
"""

import weakref

import torch

_TB = torch._C._TensorBase
_base_of = _TB._base.__get__

# Poison: NaN for floating types; for integers a pattern no index is (0xDEADBEEF..., negative).
_POISON_INT = {
    torch.int64: -0x2152411021524111,  # 0xDEADBEEFDEADBEEF as int64
    torch.int32: -0x21524111,          # 0xDEADBEEF as int32
    torch.int16: -0x2153,
    torch.int8: -0x22,
    torch.uint8: 0xDE,
}


def root_of(t):
    base = _base_of(t)
    return t if base is None else base


def raw_alias(t):
    """A plain tensor over ``t``'s memory with its geometry, holding the storage but not ``t``."""
    with torch._C.DisableTorchFunction():
        return torch.empty(0, dtype=t.dtype).set_(t.storage(), t.storage_offset(), t.size(), t.stride())


def raw_storage(t):
    """A plain 1-D tensor over the whole storage of ``t`` (in ``t``'s dtype)."""
    with torch._C.DisableTorchFunction():
        return torch.empty(0, dtype=t.dtype).set_(t.storage())


def poison(raw):
    with torch._C.DisableTorchFunction():
        if raw.dtype.is_floating_point or raw.dtype.is_complex:
            raw.fill_(float("nan"))
        elif raw.dtype == torch.bool:
            raw.fill_(True)
        else:
            raw.fill_(_POISON_INT.get(raw.dtype, -1))


class Block:
    """One allocation (a storage): its allocation stream, record_stream uses, queued users."""

    __slots__ = ("bid", "alloc_stream", "uses", "pending", "raw", "dead", "poisoned", "what",
                 "pinned", "nbytes", "__weakref__")

    def __init__(self, bid, alloc_stream, what, pinned=False):
        self.bid = bid
        self.alloc_stream = alloc_stream
        self.uses = set()      # streams given by record_stream (never the allocation stream)
        self.pending = []      # (op, stream, "reads"|"writes") of queued ops that use the block
        self.raw = None        # whole-storage alias, held only while ops are pending (for poison)
        self.dead = False
        self.poisoned = False
        self.what = what
        self.pinned = pinned
        self.nbytes = 0

    def describe(self):
        kind = "pinned host block" if self.pinned else "device block"
        return f"{kind} #{self.bid} ({self.what}, allocated on {self.alloc_stream.name})"


class Allocator:
    """Keeps the blocks of one FakeDevice. Blocks hang off their root tensor (attribute
    ``_fc_block``); a finalizer on the root is the free."""

    def __init__(self, dev):
        self._dev = weakref.ref(dev)
        self._next_id = 0
        self.live_blocks = 0
        self.allocated_bytes = 0  # device blocks only (torch.cuda.memory_allocated)

    def block_of(self, t, create=True, pinned=False):
        root = root_of(t)
        block = root.__dict__.get("_fc_block")
        if block is None and create:
            dev = self._dev()
            stream = root.__dict__.get("_fc_stream") or dev.default_stream
            self._next_id += 1
            what = f"{tuple(root.shape)} {str(root.dtype).replace('torch.', '')}"
            block = Block(self._next_id, stream, what, pinned=pinned or root.__dict__.get("_fc_pinned", False))
            root._fc_block = block
            self.live_blocks += 1
            if not block.pinned:
                with torch._C.DisableTorchFunction():
                    block.nbytes = root.storage().nbytes()
                self.allocated_bytes += block.nbytes
            weakref.finalize(root, self._on_free, weakref.ref(dev), block).atexit = False
        return block

    def adopt(self, t, stream, pinned=False):
        """Registers a fresh allocation made while ``stream`` was current."""
        if not stream.is_default:
            t._fc_stream = stream
        if pinned:
            t._fc_pinned = True
        return self.block_of(t, pinned=pinned)

    def use(self, t, op, stream, mode):
        """Notes that queued ``op`` on ``stream`` reads or writes ``t``'s block."""
        block = self.block_of(t)
        if block.raw is None:
            block.raw = raw_storage(t)
        block.pending.append((op, stream, mode))
        return block

    def release(self, block, op):
        block.pending = [p for p in block.pending if p[0] is not op]
        if not block.pending:
            block.raw = None

    def record_stream(self, t, stream):
        block = self.block_of(t)
        if stream is not block.alloc_stream:  # the allocation stream itself is ignored
            block.uses.add(stream)

    @staticmethod
    def _on_free(dev_ref, block):
        dev = dev_ref()
        block.dead = True
        if dev is None:
            return
        dev.allocator.live_blocks -= 1
        dev.allocator.allocated_bytes -= block.nbytes
        for op, stream, mode in block.pending:
            if stream is block.alloc_stream or stream in block.uses:
                continue  # stream order, or record_stream: the block waits for that stream
            dev._report(
                "stream_lifetime",
                f"{block.describe()} freed while op '{op.name}' (#{op.seq}) queued on "
                f"{stream.name} still {mode} it, and record_stream({stream.name}) was not called: "
                f"the allocator may hand it to the next allocation on {block.alloc_stream.name}",
            )
            if not block.poisoned and block.raw is not None:
                poison(block.raw)
                block.poisoned = True
