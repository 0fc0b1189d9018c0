"""kvsim.fakecuda: a deterministic fake CUDA device on which SGLang's unmodified cache code runs.

Written from what CUDA and PyTorch document (streams, events, record_stream, the caching allocator),
not from SGLang. See FakeDevice for the API; ``kernels`` holds fake sgl_kernel transfer kernels.
This package needs torch only (not kvsim's C++ module).
"""

from . import clock, kernels
from .clock import LogicalClock
from .device import FakeDevice
from .tensor import DeviceTensor
from .violation import Violation

__all__ = ["FakeDevice", "LogicalClock", "Violation", "DeviceTensor", "kernels"]
