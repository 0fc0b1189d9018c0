"""The fake device's rules, each with a planted misuse it must catch (kvsim.fakecuda)."""

import pytest
import torch

from test_fakecuda_import import load_fakecuda

fc = load_fakecuda()


@pytest.fixture
def dev():
    d = fc.FakeDevice(seed=0)
    with d.install():
        yield d


def _copy(src, dst):
    dst.copy_(src)


def _gather(src, idx, dst):
    dst.copy_(src.index_select(0, idx))


# ---- logical clock ---------------------------------------------------------------------------------

def test_clock_moves_only_when_advanced():
    clock = fc.clock.LogicalClock()
    t = clock.time_module
    assert t.monotonic() == t.monotonic() == 0.0
    t.sleep(2.5)
    assert clock.monotonic() == 2.5 and t.perf_counter() == 2.5
    clock.advance(0.5)
    assert t.time() == pytest.approx(clock._epoch + 3.0)
    clock.set(10)
    assert t.monotonic() == 10.0
    with pytest.raises(ValueError):
        clock.set(9)
    with pytest.raises(ValueError):
        clock.advance(-1)
    ticking = fc.clock.LogicalClock(tick=1e-6)
    assert ticking.monotonic() < ticking.monotonic()


# ---- install / uninstall ---------------------------------------------------------------------------

def test_install_makes_cuda_factories_device_tensors_and_uninstall_restores():
    before = {n: getattr(torch, n) for n in ("empty", "zeros", "tensor", "arange", "zeros_like")}
    before_to = torch.Tensor.__dict__.get("to")
    had_uint64 = hasattr(torch, "uint64")
    d = fc.FakeDevice()
    with d.install():
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1
        for t in (torch.empty(3, device="cuda"), torch.zeros(2, device="cuda:0"),
                  torch.ones(2, device=torch.device("cuda")), torch.full((2,), 7, device="cuda"),
                  torch.arange(4, device="cuda"), torch.tensor([1, 2], device="cuda"),
                  torch.randn(2, device="cuda"), torch.randint(0, 5, (3,), device="cuda"),
                  torch.as_tensor([1, 2], device="cuda"), torch.arange(3).cuda(),
                  torch.arange(3).to("cuda"), torch.arange(3).to(torch.device("cuda", 0))):
            assert isinstance(t, fc.DeviceTensor)
            assert t.device == torch.device("cuda", 0) and t.is_cuda
        h = torch.zeros(3)
        assert not isinstance(h, fc.DeviceTensor) and h.device.type == "cpu"
        d_t = torch.arange(3, device="cuda")
        assert isinstance(torch.zeros_like(d_t), fc.DeviceTensor)
        assert not isinstance(torch.zeros_like(d_t, device="cpu"), fc.DeviceTensor)
        assert isinstance(h.to(d_t), fc.DeviceTensor)
        assert isinstance(d_t.new_zeros(2), fc.DeviceTensor)
        p = torch.zeros(4, pin_memory=True)
        assert p.is_pinned() and not h.is_pinned() and h.pin_memory().is_pinned()
        assert torch.uint64 is not None and torch.int64.itemsize == 8 and torch.float16.itemsize == 2
        assert torch.get_device_module("cuda") is d.module
        assert torch.cuda.current_stream() is d.default_stream
    for n, f in before.items():
        assert getattr(torch, n) is f, n
    assert torch.Tensor.__dict__.get("to") is before_to
    assert hasattr(torch, "uint64") == had_uint64
    assert not torch.cuda.is_available() or torch.version.cuda is not None
    if not hasattr(torch.float32, "itemsize"):
        assert "itemsize" not in dir(torch.float32)
    with pytest.raises(Exception):
        torch.zeros(2, device="cuda")


# ---- device mixing ---------------------------------------------------------------------------------

def test_mixing_host_and_device_raises_like_cuda(dev):
    d = torch.arange(4, device="cuda")
    h = torch.arange(4)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at "
                                           "least two devices, cuda:0 and cpu!"):
        d + h
    with pytest.raises(RuntimeError, match="cpu and cuda:0"):
        torch.cat([h, d])
    with pytest.raises(RuntimeError, match="same device"):
        d.index_select(0, torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same device"):
        h[torch.tensor([0, 1], device="cuda")]
    with pytest.raises(TypeError, match="can't convert cuda:0"):
        d.numpy()
    # allowed as in CUDA: 0-dim host scalars, host indices into a device tensor, cross-device copy_
    assert isinstance(d + torch.tensor(1), fc.DeviceTensor)
    got = d[torch.tensor([3, 1])]
    assert isinstance(got, fc.DeviceTensor) and got.cpu().tolist() == [3, 1]
    h.copy_(d * 2)
    assert h.tolist() == [0, 2, 4, 6]
    back = d.cpu()
    assert type(back) is torch.Tensor and back.device.type == "cpu"
    assert dev.check_residency(back, "host") is None
    assert "device tensor" in dev.check_residency(d, "host", what="node.host_value")


def test_int32_index_tensors_index_device_tensors_as_torch_2_does(dev):
    """SGLang indexes its device pools with int32 rows of req_to_token; torch >= 2 takes int32
    index tensors (Debian's torch 1.13 refuses them), with the same positions as int64."""
    d = torch.arange(10, device="cuda") * 10
    idx32 = torch.tensor([7, 2, 2], dtype=torch.int32, device="cuda")
    got = d[idx32]
    assert isinstance(got, fc.DeviceTensor) and got.cpu().tolist() == [70, 20, 20]
    assert d[torch.tensor([1, 3], dtype=torch.int32)].cpu().tolist() == [10, 30]  # host int32 indices
    d[idx32[:2]] = torch.tensor([-1, -2], device="cuda")
    assert d.cpu().tolist()[2] == -2 and d.cpu().tolist()[7] == -1
    m = torch.zeros(3, 4, device="cuda")
    m[torch.tensor([2], dtype=torch.int32, device="cuda"), torch.tensor([1], dtype=torch.int32)] = 5.0
    assert m.cpu()[2, 1] == 5.0 and m.cpu().sum() == 5.0
    m.index_put_((torch.tensor([0], dtype=torch.int32, device="cuda"),), torch.ones(4, device="cuda"))
    assert m.cpu()[0].tolist() == [1.0] * 4
    # masks keep their meaning: a bool mask is not read as positions
    assert d[d > 60].cpu().tolist() == [80, 90]


# ---- streams and events ----------------------------------------------------------------------------

def test_side_stream_work_is_queued_until_stepped(dev):
    s = torch.cuda.Stream()
    src = torch.arange(4, dtype=torch.float32, device="cuda")
    dst = torch.zeros(4, device="cuda")
    with torch.cuda.stream(s):
        assert torch.cuda.current_stream() is s
        dev.submit(_copy, reads=(src,), writes=(dst,), name="copy")
        ev = torch.cuda.Event()
        ev.record()
    assert torch.cuda.current_stream() is dev.default_stream
    assert dev.pending(s) == 1 and not ev.query() and not s.query()
    assert dst.cpu().tolist() == [0, 0, 0, 0]
    assert dev.runnable(s) and dev.step(s) == 1
    assert ev.query() and dst.cpu().tolist() == [0, 1, 2, 3]
    assert dev.step(s) == 0


def test_event_synchronize_and_default_stream_wait_run_the_side_stream(dev):
    s = torch.cuda.Stream()
    dst = torch.zeros(2, device="cuda")
    one = torch.ones(2, device="cuda")
    with torch.cuda.stream(s):
        dev.submit(_copy, reads=(one,), writes=(dst,), name="a")
        e1 = s.record_event()
        dev.submit(_copy, reads=(one * 5,), writes=(dst,), name="b")
    e1.synchronize()  # host waits: only up to e1
    assert dev.pending(s) == 1 and dst.cpu().tolist() == [1, 1]
    torch.cuda.current_stream().wait_stream(s)  # the eager stream waits: the device runs s
    assert dev.pending(s) == 0 and dst.cpu().tolist() == [5, 5]


def test_side_stream_wait_on_another_stream_blocks_until_that_stream_runs(dev):
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(1, device="cuda")
    y = torch.zeros(1, device="cuda")
    two = torch.full((1,), 2.0, device="cuda")
    with torch.cuda.stream(a):
        dev.submit(_copy, reads=(two,), writes=(x,), name="write x")
        ea = torch.cuda.Event()
        ea.record()
    with torch.cuda.stream(b):
        ea.wait()
        dev.submit(_copy, reads=(x,), writes=(y,), name="read x")
    assert not dev.runnable(b) and dev.step(b) == 0  # blocked on a's event
    assert dev.step(a) == 1
    assert dev.step(b, n=5) == 2 and y.cpu().tolist() == [2.0]


def test_waiting_on_an_unrecorded_event_is_reported(dev):
    s = torch.cuda.Stream()
    e = torch.cuda.Event()
    assert e.query()  # CUDA: an event never recorded reports complete
    s.wait_event(e)
    e.synchronize()
    kinds = [v.kind for v in dev.violations]
    assert kinds == ["event", "event"]


def test_elapsed_time_uses_the_logical_clock(dev):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    dev.clock.advance(0.25)
    b.record()
    assert a.elapsed_time(b) == pytest.approx(250.0)
    with pytest.raises(ValueError):  # torch 2.x's type (tools/cuda_truth recording)
        torch.cuda.Event().elapsed_time(b)


def test_copy_on_side_stream_is_queued_and_to_device_non_blocking(dev):
    s = torch.cuda.Stream()
    host = torch.arange(3, pin_memory=True)
    with torch.cuda.stream(s):
        d = host.to("cuda", non_blocking=True)
    assert isinstance(d, fc.DeviceTensor) and dev.pending(s) == 1
    dev.drain()
    assert d.cpu().tolist() == [0, 1, 2]


# ---- caching-allocator lifetime --------------------------------------------------------------------

def _queued_gather_then_free(dev, record):
    s = torch.cuda.Stream()
    src = torch.arange(10, 20, device="cuda")
    dst = torch.zeros(3, dtype=torch.int64, device="cuda")
    idx = torch.tensor([4, 0, 9]).to("cuda", non_blocking=True)  # allocated on the default stream
    with torch.cuda.stream(s):
        dev.submit(_gather, reads=(src, idx), writes=(dst,), name="gather")
        if record:
            idx.record_stream(s)
    del idx  # last reference gone while the gather is still queued on s
    return s, dst, src


def test_freed_while_queued_without_record_stream_is_violation_and_poison(dev):
    s, dst, src = _queued_gather_then_free(dev, record=False)
    assert [v.kind for v in dev.violations] == ["stream_lifetime"]
    detail = dev.violations[0].detail
    assert "gather" in detail and "stream1" in detail and "default_stream" in detail
    with pytest.raises(Exception):  # the poisoned indices: garbage, out of range
        dev.drain()


def test_record_stream_keeps_the_block_until_the_stream_passes(dev):
    s, dst, src = _queued_gather_then_free(dev, record=True)
    assert dev.violations == []
    dev.drain()
    assert dst.cpu().tolist() == [14, 10, 19]


def test_same_stream_allocation_and_views_are_safe(dev):
    s = torch.cuda.Stream()
    src = torch.arange(4, device="cuda")
    dst = torch.zeros(4, dtype=torch.int64, device="cuda")
    with torch.cuda.stream(s):
        tmp = torch.arange(4, device="cuda") * 3  # allocated on s itself
        dev.submit(_copy, reads=(tmp,), writes=(dst,), name="copy tmp")
    del tmp
    view = src[1:3]
    with torch.cuda.stream(s):
        dev.submit(_copy, reads=(view,), writes=(dst[:2],), name="copy view")
    del src  # the view keeps its base alive
    assert dev.violations == []
    dev.drain()
    assert dst.cpu().tolist() == [1, 2, 6, 9]
    del view
    assert dev.violations == []


def test_pinned_host_memory_freed_under_a_queued_kernel_is_reported(dev):
    s = torch.cuda.Stream()
    host = torch.arange(4.0, pin_memory=True)
    dst = torch.zeros(4, device="cuda")
    with torch.cuda.stream(s):
        dev.submit(_copy, reads=(host,), writes=(dst,), name="h2d kernel")
    del host
    assert [v.kind for v in dev.violations] == ["stream_lifetime"]
    dev.drain()
    assert torch.isnan(dst.cpu()).all()


def test_submit_refuses_a_closure_over_a_tensor(dev):
    t = torch.zeros(1, device="cuda")
    with pytest.raises(ValueError, match="captures a tensor"):
        dev.submit(lambda: t.add_(1))


def test_same_sequence_same_results():
    def run():
        d = fc.FakeDevice(seed=7)
        with d.install():
            s = torch.cuda.Stream()
            x = torch.randn(5, device="cuda")
            out = torch.zeros(5, device="cuda")
            idx = torch.tensor([4, 3, 2, 1, 0], device="cuda")
            with torch.cuda.stream(s):
                d.submit(_gather, reads=(x, idx), writes=(out,), name="g")
            del idx
            v = [(x.kind, x.detail) for x in d.violations]
            try:
                d.drain()
            except Exception as exc:  # poisoned
                v.append(("raised", type(exc).__name__))
            return x.cpu().tolist(), out.cpu().tolist(), v

    assert run() == run()
