"""kvsim.fakecuda imports with torch alone (no kvsim._core), and exposes the API others code against.

Also the helper the other test_fakecuda_* files use: `load_fakecuda()`."""

from sglang_src import import_pure_subpackage


def load_fakecuda():
    """kvsim.fakecuda, with torch alone (sglang_src.import_pure_subpackage)."""
    return import_pure_subpackage("kvsim.fakecuda")


def test_api_names():
    fc = load_fakecuda()
    dev = fc.FakeDevice(seed=3)
    for name in ("Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
                 "synchronize", "is_available", "device_count", "current_device", "set_device",
                 "get_device_name", "get_device_properties", "mem_get_info", "memory_allocated",
                 "empty_cache", "cudart", "is_initialized"):
        assert hasattr(dev.module, name), name
    for name in ("wait_event", "wait_stream", "synchronize", "query", "record_event"):
        assert callable(getattr(dev.module.Stream(), name)), name
    assert dev.module.is_available() and dev.module.device_count() == 1 and dev.module.current_device() == 0
    assert dev.module.cudart().cudaHostRegister(0, 8, 0) == 0
    assert dev.module.cudart().cudaHostUnregister(0) == 0
    assert dev.module.get_device_properties(0).total_memory == dev.total_memory
    assert isinstance(dev.clock, fc.clock.LogicalClock)
    assert fc.Violation("event", "x").kind == "event"
    mod = fc.kernels.module_for(dev)
    assert callable(mod.transfer_kv_per_layer) and callable(mod.transfer_kv_all_layer_mla_lf_pf)
