"""kvsim.sglang_target.loader: SGLang's real cache modules load from every bundle tag, stand-ins
serve the rest, and unload leaves nothing behind."""

import inspect
import os
import sys
import types

import pytest
import torch
from sglang_src import bundle_tags, sglang_checkout, target

TAG = "sglang-27659ea8c8"
MC = "sglang.srt.mem_cache"


def leftover_modules():
    tops = {"sglang", "triton", "sgl_kernel", "msgspec"}
    return sorted(n for n in sys.modules if n.split(".")[0] in tops
                  and getattr(sys.modules[n], "__loader__", None).__class__.__module__
                  == "kvsim.sglang_target.loader" or n.split(".")[0] == "sglang")


@pytest.fixture(autouse=True)
def no_load_left_behind():
    target.unload()
    yield
    target.unload()
    assert leftover_modules() == []
    assert not any(type(f).__module__ == "kvsim.sglang_target.loader" for f in sys.meta_path)


class FakeClock:
    """Test double of the fake device's clock: a `time` module whose time the test sets."""

    def __init__(self, now):
        self.now = now
        self.time_module = types.SimpleNamespace(monotonic=lambda: self.now, time=lambda: self.now,
                                                 perf_counter=lambda: self.now, sleep=lambda s: None)


class FakeDevice:
    """Test double with the attributes the loader uses of kvsim.fakecuda.FakeDevice."""

    def __init__(self, now=1234.5):
        self.clock = FakeClock(now)
        self.module = types.ModuleType("kvsim_test_device")
        self.module.Event = lambda **kwargs: ("event", kwargs)


def inside(path, tree):
    return os.path.abspath(path).startswith(os.path.abspath(tree) + os.sep)


@pytest.mark.parametrize("tag", bundle_tags())
def test_every_tag_loads_sglangs_real_hicache_classes(tag):
    src = sglang_checkout(tag)
    mods = target.load_sglang(src)
    try:
        assert mods.era.probe(src.package_dir)
        for name in ("HiRadixCache", "RadixCache", "HiCacheController", "MHATokenToKVPoolHost",
                     "MLATokenToKVPoolHost", "PagedTokenToKVPoolAllocator", "TokenToKVPoolAllocator",
                     "CacheInitParams", "UnifiedRadixCache", "HybridCacheController",
                     "MetadataBuffers", "HiCacheStorage", "HiCacheFile", "HostPoolGroup"):
            cls = getattr(mods, name)
            assert inspect.isclass(cls), name
            # The class came from the tree's own file: the real code, not a stand-in.
            assert inside(inspect.getsourcefile(cls), src.python_dir), (name, inspect.getsourcefile(cls))
        hiradix = mods[f"{MC}.hiradix_cache"]
        assert inside(hiradix.__file__, src.python_dir)
        assert hiradix.HiRadixCache is mods.HiRadixCache
        assert mods.optional_errors == {}, mods.optional_errors
        assert mods.source is src and target.active() is mods
    finally:
        mods.unload()
    assert not mods.loaded


def test_unload_then_another_revision_in_one_process():
    old = target.load_sglang(sglang_checkout("sglang-900aad5f72"))
    old_cls, old_tree = old.HiRadixCache, old.source.python_dir
    assert old.era.name == "2026-04" and old.MHATokenToKVPoolHost.__module__ == f"{MC}.memory_pool_host"
    old.unload()
    assert leftover_modules() == []
    new = target.load_sglang(sglang_checkout("sglang-6ed5780c4f"))
    assert new.era.name == "2026-08" and new.MHATokenToKVPoolHost.__module__ == f"{MC}.pool_host.mha"
    assert new.HiRadixCache is not old_cls
    assert inside(inspect.getsourcefile(new.HiRadixCache), new.source.python_dir)
    assert not inside(inspect.getsourcefile(new.HiRadixCache), old_tree)


def test_a_second_load_without_unload_is_refused():
    src = sglang_checkout(TAG)
    target.load_sglang(src)
    with pytest.raises(target.SglangLoadError, match="already loaded"):
        target.load_sglang(src)


def test_a_foreign_sglang_module_blocks_the_load(monkeypatch):
    src = sglang_checkout(TAG)
    monkeypatch.setitem(sys.modules, "sglang", types.ModuleType("sglang"))
    with pytest.raises(target.SglangLoadError, match="already imported"):
        target.load_sglang(src)


def test_heavy_package_init_never_runs(tmp_path):
    src = sglang_checkout(TAG)
    pkg = tmp_path / "python" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('sglang/__init__.py ran')\n")
    (pkg / "srt").mkdir()
    (pkg / "srt" / "__init__.py").write_text("raise RuntimeError('sglang/srt/__init__.py ran')\n")
    for child in os.listdir(os.path.join(src.package_dir, "srt")):
        os.symlink(os.path.join(src.package_dir, "srt", child), pkg / "srt" / child)
    mods = target.load_sglang(str(tmp_path))
    assert mods.source.kind == "checkout" and mods.HiRadixCache is not None
    assert getattr(sys.modules["sglang"], "__kvsim_skeleton__", False)
    assert getattr(sys.modules["sglang.srt"], "__kvsim_skeleton__", False)


def test_a_dummy_raises_a_clear_error_when_called_and_is_inert_otherwise():
    mods = target.load_sglang(sglang_checkout(TAG))
    schedule_batch = mods["sglang.srt.managers.schedule_batch"]  # not loaded: a dummy module
    req = schedule_batch.Req
    assert target.is_dummy(req) and schedule_batch.Req is req
    with pytest.raises(target.StandinUnavailable,
                       match=r"kvsim stand-in: sglang\.srt\.managers\.schedule_batch\.Req is not available"):
        req(rid="r0")
    assert list(req) == [] and not req and req[int] is req

    class OurReq(req):  # SGLang subclasses imported names; a subclass is a normal class
        def __init__(self, rid):
            self.rid = rid

    assert OurReq("r1").rid == "r1"


def test_get_device_module_is_the_devices_module_and_the_clock_is_the_devices():
    device = FakeDevice(now=1234.5)
    mods = target.load_sglang(sglang_checkout(TAG), device=device)
    assert mods["sglang.srt.utils"].get_device_module() is device.module
    assert mods[f"sglang.srt.managers.cache_controller"].device_module is device.module
    radix = mods[f"{MC}.radix_cache"]
    assert radix.time is device.clock.time_module
    assert mods[f"{MC}.hiradix_cache"].time is device.clock.time_module
    node = radix.TreeNode()  # SGLang stamps nodes with time.monotonic()
    assert node.last_access_time == 1234.5
    device.clock.now = 2000.0
    assert radix.TreeNode().last_access_time == 2000.0


def test_without_a_device_the_device_module_is_torch_cuda():
    mods = target.load_sglang(sglang_checkout(TAG))
    assert mods["sglang.srt.utils"].get_device_module() is torch.cuda
    assert mods["sglang.srt.utils"].is_cuda() and not mods["sglang.srt.utils"].is_hip()


@pytest.mark.parametrize("tag", ["sglang-900aad5f72", "sglang-6ed5780c4f"])
def test_device_kernels_serve_sgl_kernel_kvcacheio(tag):
    def transfer_kv_per_layer(**kwargs):
        return ("fake", kwargs)

    kernels = types.SimpleNamespace(transfer_kv_per_layer=transfer_kv_per_layer)
    mods = target.load_sglang(sglang_checkout(tag), kernels=kernels)
    host = mods[mods.MHATokenToKVPoolHost.__module__]
    assert host.transfer_kv_per_layer is transfer_kv_per_layer
    # Kernels the device does not provide raise when called; JIT probes report "unavailable".
    with pytest.raises(target.StandinUnavailable, match=r"sgl_kernel\.kvcacheio\.transfer_kv_all_layer "):
        host.transfer_kv_all_layer()
    jit_names = [n for n in vars(host) if n.startswith("can_use")]
    assert jit_names and all(getattr(host, n)() is False for n in jit_names)


def test_tp_group_is_a_single_rank_gloo_group_whose_all_reduce_runs():
    mods = target.load_sglang(sglang_checkout("sglang-900aad5f72"))
    group = mods["sglang.srt.distributed"].kvsim_tp_group()
    assert torch.distributed.get_world_size(group=group) == 1
    assert torch.distributed.get_backend(group) == "gloo"
    value = torch.tensor([7, 3], dtype=torch.int64)
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MIN, group=group)
    assert value.tolist() == [7, 3]
    assert mods["sglang.srt.distributed"].get_tensor_model_parallel_world_size() == 1


def test_runtime_context_parallel_is_one_rank_and_configurable():
    mods = target.load_sglang(sglang_checkout("sglang-6ed5780c4f"))
    ctx = mods["sglang.srt.runtime_context"]
    assert ctx.get_parallel().tp_size == 1 and ctx.get_parallel().tp_rank == 0
    assert not ctx.get_exec().features.enable_memory_saver  # never set: reads as off
    ctx.configure(schedule={"page_size": 4})
    assert ctx.get_schedule().page_size == 4


def test_environ_standin_reads_the_environment(monkeypatch):
    mods = target.load_sglang(sglang_checkout(TAG))
    envs = mods["sglang.srt.environ"].envs
    monkeypatch.delenv("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", raising=False)
    assert not envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.is_set()
    monkeypatch.setenv("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", "/tmp/x")
    assert envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.get() == "/tmp/x"
    monkeypatch.setenv("SGLANG_ENABLE_SOMETHING", "true")
    assert envs.SGLANG_ENABLE_SOMETHING.get() is True


def test_triton_standin_is_not_left_for_other_importers():
    mods = target.load_sglang(sglang_checkout("sglang-6ed5780c4f"))
    assert "triton" not in sys.modules
    memory_pool = mods[f"{MC}.memory_pool"]
    assert memory_pool.triton.__name__ == "triton"  # SGLang's own reference to the stand-in
    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    else:
        assert not getattr(sys.modules["triton"], "__file__", "").startswith(
            os.path.dirname(target.__file__))


def test_a_tree_of_no_known_era_is_a_clear_error(tmp_path):
    mem_cache = tmp_path / "python" / "sglang" / "srt" / "mem_cache"
    mem_cache.mkdir(parents=True)
    (mem_cache / "radix_cache.py").write_text("")
    with pytest.raises(target.SglangLoadError, match=r"matches 0 known eras.*2026-04.*2026-08"):
        target.load_sglang(str(tmp_path))


def test_alloc_mmap_gives_zeroed_host_tensors():
    mods = target.load_sglang(sglang_checkout("sglang-6ed5780c4f"))
    alloc_mmap = mods[f"{MC}.pool_host.common"].alloc_mmap
    buf = alloc_mmap((2, 3), torch.float16)
    assert buf.shape == (2, 3) and buf.dtype == torch.float16 and buf.device.type == "cpu"
    assert int(buf.count_nonzero()) == 0


def test_utils_num_new_pages_counts_pages_beyond_the_prefix():
    mods = target.load_sglang(sglang_checkout(TAG))
    pages = mods["sglang.srt.utils"].get_num_new_pages
    seq = torch.tensor([5, 8])
    assert pages(seq_lens=seq, page_size=4, prefix_lens=torch.tensor([4, 0])) == 1 + 2
    assert pages(seq_lens=torch.tensor([5, 9, 4]), page_size=4, decode=True) == 1 + 1 + 0


def test_with_kvsims_fake_device_when_it_is_there():
    fakecuda = pytest.importorskip("kvsim.fakecuda")
    device = fakecuda.FakeDevice()
    mods = target.load_sglang(sglang_checkout(TAG), device=device)
    assert mods["sglang.srt.managers.cache_controller"].device_module is device.module
    radix = mods[f"{MC}.radix_cache"]
    assert radix.time is device.clock.time_module
    before = device.clock.now()
    node = radix.TreeNode()
    assert before <= node.last_access_time <= device.clock.now()


def test_unload_keeps_third_party_modules_kvsim_did_not_make(monkeypatch):
    foreign = types.ModuleType("zmq")
    monkeypatch.setitem(sys.modules, "zmq", foreign)
    target.load_sglang(sglang_checkout(TAG))
    target.unload()
    assert sys.modules["zmq"] is foreign
