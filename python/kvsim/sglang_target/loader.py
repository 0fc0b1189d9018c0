"""Imports SGLang's unmodified cache modules from a source tree (kvsim.sglang_target.source)
through a sys.meta_path finder that serves, for every `sglang.*` name:

- the tree's real file for the cache code (sglang.srt.mem_cache.*, managers.cache_controller,
  disaggregation.utils, managers.io_struct, server_args);
- a kvsim stand-in (standins/) for the runtime parts a cache touches (utils, environ, parallel
  state, metrics, KV events, kernels ...);
- an empty package for the heavy package __init__s it skips (sglang, sglang.srt, ...);
- an inert dummy for everything else, and for triton / sgl_kernel / msgspec / zmq imports made
  by SGLang's code.

`load_sglang(source, device)` returns SglangModules; its `unload()` removes every module the load
created, so another revision can load in the same process."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import time as _real_time
import types
from typing import Dict, Optional

from kvsim.sglang_target import standins as _standins
from kvsim.sglang_target.dummy import DummyModule
from kvsim.sglang_target.eras import Era, UnknownEra, detect_era
from kvsim.sglang_target.source import SglangSource, resolve_source

# Real code is loaded for these modules (and everything under the prefixes ending in ".").
REAL_PREFIXES = ("sglang.srt.mem_cache.",)
REAL_MODULES = ("sglang.srt.mem_cache", "sglang.srt.managers.cache_controller",
                "sglang.srt.disaggregation.utils", "sglang.srt.managers.io_struct",
                "sglang.srt.server_args")
_STANDIN_DIR = os.path.dirname(os.path.abspath(_standins.__file__))
_active_lock = threading.Lock()
_active: Optional["_Load"] = None


class SglangLoadError(Exception):
    """SGLang's cache modules could not be loaded from the given tree."""


class Platform:
    """sglang.srt.platforms.current_platform as seen by the tree: CUDA (kvsim's fake device)."""

    device_name = "cuda"
    device_type = "cuda"

    def is_cuda(self):
        return True

    def is_cuda_alike(self):
        return True

    def synchronize(self, *args, **kwargs):
        """The pools' get_cpu_copy / load_cpu_copy (August 2026) wait on the device here."""
        import torch  # noqa: PLC0415 - torch.cuda is the fake device's once installed
        torch.cuda.synchronize()

    def __getattr__(self, name):
        if name.startswith("is_"):
            return lambda *a, **k: False
        raise AttributeError(f"kvsim stand-in platform has no {name}")


def _device_kernels(device):
    """The fake device's transfer-kernel module (kvsim.fakecuda.kernels.module_for), or None
    while it does not exist: SGLang's kernel calls then raise a clear stand-in error."""
    if device is None:
        return None
    import importlib  # noqa: PLC0415
    try:
        fake_kernels = importlib.import_module("kvsim.fakecuda.kernels")
    except ModuleNotFoundError as exc:
        if exc.name in ("kvsim.fakecuda", "kvsim.fakecuda.kernels"):
            return None  # the hook point: kernels not written yet
        raise
    module_for = getattr(fake_kernels, "module_for", None)
    return module_for(device) if module_for is not None else None


class LoadContext:
    """What the stand-ins of one load see (as `_kvsim_load`)."""

    def __init__(self, source: SglangSource, era: Era, device, kernels, env_defaults):
        self.source = source
        self.era = era
        self.device = device
        self.kernels = kernels
        self.env_defaults = dict(env_defaults or {})
        self.platform = Platform()
        if device is not None:
            self.device_module = device.module
        else:
            import torch  # noqa: PLC0415
            self.device_module = torch.cuda

    @staticmethod
    def process_group():
        """A single-rank gloo group (the default group, created on first use) for SGLang's TP
        group: its all_reduce and barrier really run."""
        import torch.distributed as dist  # noqa: PLC0415
        if not dist.is_available():
            raise SglangLoadError("torch.distributed is not available in this torch build")
        if not dist.is_initialized():
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        if dist.get_world_size() != 1:
            raise SglangLoadError(f"kvsim needs a single-rank process group; the default group "
                                  f"has {dist.get_world_size()} ranks")
        return dist.group.WORLD

    def parallel_defaults(self):
        return dict(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_tp_rank=0, attn_tp_size=1,
                    attn_dp_rank=0, attn_dp_size=1, attn_cp_rank=0, attn_cp_size=1,
                    attn_dcp_rank=0, attn_dcp_size=1, dcp_enabled=False, attn_cp_group=None,
                    tp_group=None, moe_ep_size=1, moe_tp_size=1)


def _importer_is_sglang() -> bool:
    """True when the import in progress comes from SGLang's code or kvsim's stand-ins (not from
    torch or anything else that happens to probe for triton)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith("<frozen importlib") or "importlib" + os.sep in filename
                or filename == __file__):
            name = frame.f_globals.get("__name__", "") or ""
            top = name.split(".")[0]
            return (top == "sglang" or name.startswith("kvsim.sglang_target")
                    or top in _standins.DUMMY_TOPLEVEL or top in _standins.SOFT_TOPLEVEL)
        frame = frame.f_back
    return False


def _installed(top: str) -> bool:
    """Whether a real top-level package `top` is importable (found on sys.path, not imported)."""
    return importlib.machinery.PathFinder.find_spec(top) is not None


# Compiled module code by (path, source): a process that loads SGLang again (the tests unload it
# around each test; another revision's files differ) compiles each file once, not per load, which
# was about half of a load's time. A code object is immutable and executes the same each time.
_CODE = {}


def _compiled(source, path, dont_inherit):
    key = (path, source, dont_inherit)
    code = _CODE.get(key)
    if code is None:  # (compile here inherits this file's future flags unless dont_inherit)
        code = _CODE[key] = compile(source, path, "exec", dont_inherit=dont_inherit)
    return code


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """The tree's real files, as importlib loads them, with their compiled code kept (_CODE)."""

    def source_to_code(self, data, path, *, _optimize=-1):
        if _optimize != -1:
            return super().source_to_code(data, path, _optimize=_optimize)
        return _compiled(data, path, True)  # as importlib compiles


class _StandinLoader(importlib.abc.Loader):
    def __init__(self, load: "_Load", standin: str):
        self.load, self.standin = load, standin

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__dict__["_kvsim_load"] = self.load.ctx
        path = os.path.join(_STANDIN_DIR, self.standin + ".py")
        module.__file__ = path
        with open(path) as f:
            code = _compiled(f.read(), path, False)
        exec(code, module.__dict__)  # noqa: S102 - our own stand-in source


class _DummyLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = DummyModule(spec.name)
        module.__path__ = []  # a package, so `import a.b.c` under a dummy also works
        return module

    def exec_module(self, module):
        module.__kvsim_dummy__ = True


class _SkeletonLoader(importlib.abc.Loader):
    """An empty package in place of a heavy SGLang __init__ (sglang, sglang.srt, ...)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__kvsim_skeleton__ = True


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, load: "_Load"):
        self.load = load

    def find_spec(self, fullname, path, target=None):
        return self.load.spec_for(fullname)


class _Load:
    def __init__(self, ctx: LoadContext):
        self.ctx = ctx
        self.pkg_root = ctx.source.python_dir
        self.created: list = []  # sys.modules names this load made, in order
        self.forced_dummy: set = set()
        self.mods: Optional["SglangModules"] = None
        self.finder = _Finder(self)

    # --- what each name is -------------------------------------------------------------------
    def _file_of(self, fullname):
        base = os.path.join(self.pkg_root, *fullname.split("."))
        if os.path.isfile(base + ".py"):
            return base + ".py", None
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), [base]
        if os.path.isdir(base):
            return None, [base]  # a namespace package in the tree (the slice has no __init__s)
        return None, None

    def _is_real(self, fullname):
        return fullname in REAL_MODULES or fullname.startswith(REAL_PREFIXES)

    def _is_skeleton(self, fullname):
        return any(real.startswith(fullname + ".") for real in REAL_MODULES)

    def spec_for(self, fullname):
        top = fullname.split(".")[0]
        if top != "sglang":
            if top in _standins.SOFT_TOPLEVEL:
                if _installed(top):
                    return None
            elif top not in _standins.DUMMY_TOPLEVEL:
                return None
            if not _importer_is_sglang():
                return None
        if fullname in self.forced_dummy:
            return self._spec(fullname, _DummyLoader(), package=True)
        standin = _standins.STANDINS.get(fullname)
        if standin is not None:
            return self._spec(fullname, _StandinLoader(self, standin), package=True)
        if fullname.startswith(self.ctx.era.kernel_prefixes) and (
                fullname in self.ctx.era.kernel_prefixes
                or any(fullname.startswith(p + ".") for p in self.ctx.era.kernel_prefixes)):
            return self._spec(fullname, _StandinLoader(self, "kernels"), package=True)
        if self._is_real(fullname):
            path, search = self._file_of(fullname)
            if path is not None:
                return importlib.util.spec_from_file_location(
                    fullname, path, loader=_SourceLoader(fullname, path),
                    submodule_search_locations=search)
            if search is not None:
                return self._spec(fullname, _SkeletonLoader(), package=True, search=search)
            return self._spec(fullname, _DummyLoader(), package=True)
        if self._is_skeleton(fullname):
            _path, search = self._file_of(fullname)
            return self._spec(fullname, _SkeletonLoader(), package=True, search=search or [])
        return self._spec(fullname, _DummyLoader(), package=True)

    @staticmethod
    def _spec(fullname, loader, package, search=None):
        spec = importlib.machinery.ModuleSpec(fullname, loader, is_package=package)
        if package:
            spec.submodule_search_locations = list(search or [])
        return spec

    # --- bookkeeping --------------------------------------------------------------------------
    def owned_names(self):
        return [n for n in sys.modules if self._owned(n)]

    @staticmethod
    def _owned(name):
        """sglang.* modules, and third-party modules only where kvsim made them (a real triton
        that torch imported stays)."""
        if name == "sglang" or name.startswith("sglang."):
            return True
        top = name.split(".")[0]
        if top not in _standins.SOFT_TOPLEVEL and top not in _standins.DUMMY_TOPLEVEL:
            return False
        loader = getattr(sys.modules.get(name), "__loader__", None)
        return isinstance(loader, (_StandinLoader, _DummyLoader))

    def import_module(self, name):
        import importlib  # noqa: PLC0415
        return importlib.import_module(name)


class SglangModules:
    """The loaded SGLang cache code. Attributes named as SGLang's classes (None where this era has
    none); `mods["sglang.srt.mem_cache.hiradix_cache"]` gives a module by dotted name."""

    def __init__(self, load: _Load, optional_errors: Dict[str, str], torch_patches):
        self._load = load
        self.source: SglangSource = load.ctx.source
        self.era: Era = load.ctx.era
        self.device = load.ctx.device
        self.context = load.ctx
        self.optional_errors = dict(optional_errors)  # optional module -> why it did not load
        self.torch_patches = tuple(torch_patches)
        self.modules: Dict[str, types.ModuleType] = {}
        self.refresh()

    def refresh(self):
        self.modules = {n: m for n, m in sys.modules.items()
                        if n.startswith("sglang") and m is not None and _is_real_module(m, self._load)}
        for attr, candidates in self.era.symbols.items():
            value = None
            for mod_name in candidates:
                module = self.modules.get(mod_name)
                if module is not None and attr in module.__dict__:
                    value = module.__dict__[attr]
                    break
            setattr(self, attr, value)

    def __getitem__(self, name) -> types.ModuleType:
        module = sys.modules.get(name) if self.loaded else None
        if module is None or not name.startswith("sglang"):
            raise KeyError(f"{name} is not a module of this SGLang load ({self.source.describe()})")
        return module

    def __contains__(self, name):
        return self.loaded and name in sys.modules and name.startswith("sglang")

    def standin(self, name) -> types.ModuleType:
        """A stand-in module of this load by SGLang name (e.g. sglang.srt.runtime_context)."""
        return self[name]

    @property
    def loaded(self) -> bool:
        return _active is self._load

    def unload(self):
        unload()

    def __repr__(self):
        return f"<SglangModules {self.source.describe()} era {self.era.name}>"


def _is_real_module(module, load: _Load) -> bool:
    path = getattr(module, "__file__", None)
    return bool(path) and os.path.abspath(path).startswith(os.path.abspath(load.pkg_root) + os.sep)


def _swap_clock(modules, device):
    """Points every real SGLang module's `time` at the device's logical clock (LRU timestamps,
    prefetch timeouts): the simulator decides what time it is."""
    clock_time = device.clock.time_module
    for module in modules:
        if module.__dict__.get("time") is _real_time:
            module.time = clock_time


def load_sglang(source, device=None, *, kernels=None, env_defaults=None, bundle=None, cache_dir=None):
    """Loads SGLang's cache modules from `source` (anything resolve_source accepts). `device`: a
    kvsim.fakecuda.FakeDevice (its `.module` is SGLang's device module, its clock its `time`);
    None uses torch.cuda. `kernels`: a module of transfer kernels to serve for SGLang's kernel
    modules (default: the fake device's, when kvsim.fakecuda provides them). One load at a time
    per process: call unload() before loading another revision."""
    global _active
    from kvsim.sglang_target.torch_compat import ensure_torch_features  # noqa: PLC0415

    src = resolve_source(source, bundle=bundle, cache_dir=cache_dir)
    try:
        era = detect_era(src.package_dir)
    except UnknownEra as exc:
        raise SglangLoadError(f"{src.describe()}: {exc}") from exc
    with _active_lock:
        if _active is not None:
            raise SglangLoadError(f"an SGLang tree is already loaded ({_active.ctx.source.describe()}); "
                                  "call kvsim.sglang_target.unload() first")
        clash = sorted(n for n in sys.modules if n == "sglang" or n.startswith("sglang."))
        if clash:
            raise SglangLoadError(f"sglang modules are already imported in this process (not by kvsim): "
                                  f"{', '.join(clash[:5])}")
        if kernels is None:
            kernels = _device_kernels(device)
        load = _Load(LoadContext(src, era, device, kernels, env_defaults))
        before = set(sys.modules)
        sys.meta_path.insert(0, load.finder)
        _active = load
    try:
        patches = ensure_torch_features()
        optional_errors = {}
        for name in era.required:
            try:
                load.import_module(name)
            except Exception as exc:
                raise SglangLoadError(f"{src.describe()}: could not import {name} "
                                      f"(era {era.name}): {type(exc).__name__}: {exc}") from exc
        for name in era.optional:
            if not _module_exists(load, name):
                continue
            snapshot = set(sys.modules)
            try:
                load.import_module(name)
            except Exception as exc:  # noqa: BLE001 - reported, and the name becomes a dummy
                optional_errors[name] = f"{type(exc).__name__}: {exc}"
                for partial in set(sys.modules) - snapshot:
                    if load._owned(partial) and _is_real_module(sys.modules[partial], load):
                        del sys.modules[partial]
                load.forced_dummy.add(name)
        load.created = sorted(set(sys.modules) - before, key=lambda n: n.count("."))
        mods = SglangModules(load, optional_errors, patches)
        if device is not None:
            _swap_clock(mods.modules.values(), device)
        # SGLang's modules hold their triton / sgl_kernel / msgspec stand-ins by reference; out of
        # sys.modules they cannot mislead torch or anything else that probes for those packages.
        for name in load.owned_names():
            if not name.startswith("sglang"):
                sys.modules.pop(name, None)
        load.mods = mods
        return mods
    except BaseException:
        unload()
        raise


def _module_exists(load: _Load, name: str) -> bool:
    path, search = load._file_of(name)
    return path is not None or search is not None


def unload():
    """Removes the active load's finder and every sglang / stand-in module from sys.modules."""
    global _active
    with _active_lock:
        load = _active
        _active = None
        if load is None:
            return
        while load.finder in sys.meta_path:
            sys.meta_path.remove(load.finder)
        for name in load.owned_names():
            sys.modules.pop(name, None)
        importlib.invalidate_caches()


def active() -> Optional[SglangModules]:
    """The SglangModules of the load in effect, or None."""
    return None if _active is None else getattr(_active, "mods", None)
