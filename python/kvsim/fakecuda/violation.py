"""What the fake device reports when the code under test breaks a CUDA rule it cannot see on a CPU."""

from dataclasses import dataclass

# kinds:
#   stream_lifetime  a block freed while an op queued on another stream still used it, no record_stream
#   device_mix       host and device tensors mixed where CUDA would fail (reported only where not raised)
#   kernel_input     a fake kernel's input check failed (the exception is raised as well)
#   event            waiting on / synchronizing an event that was never recorded
#   illegal_address  a queued op touched memory outside any live allocation (poisoned indices, ...)
KINDS = ("stream_lifetime", "device_mix", "kernel_input", "event", "illegal_address")


@dataclass(frozen=True)
class Violation:
    kind: str
    detail: str

    def __str__(self):
        return f"{self.kind}: {self.detail}"
