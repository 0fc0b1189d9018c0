"""The fake device that device tensors belong to: one at a time (the last created or installed)."""

ACTIVE = [None]


def active_device():
    dev = ACTIVE[0]
    if dev is None:
        raise RuntimeError("kvsim.fakecuda: no FakeDevice exists (create one first)")
    return dev
