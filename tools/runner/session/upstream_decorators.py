"""PyTorch's own test decorators read as test_utils.hardware requirements.

Upstream test files (and files written in their style) say what hardware a test needs with
torch.testing._internal's decorators, not with our markers. This module adapts those decorators
at the moment they are applied: an import hook wraps them right after torch's testing modules
are imported and before a test module can use them. Each wrapper applies torch's decorator
unchanged and records the same Requirements our markers record (markers.requires), so the
plugin places the test in one variant and checks the target's nccl / triton declarations.

    upstream decorator                                   requirement (variant)
    common_distributed.skip_if_lt_x_gpu(n)               the smallest variant with >= n GPUs
    common_distributed.requires_nccl()                   nccl (gpu, or more GPUs with the above)
    common_distributed.requires_accelerator_dist_backend nccl when the list names it; else not
                                                         applicable (xccl, hccl: no variant)
    common_distributed.requires_gloo()                   nothing: every variant's torch has gloo
    common_utils.requires_cuda                           1 GPU (gpu)
    inductor_utils.requires_gpu() / requires_triton()    triton (gpu): HAS_GPU needs triton
    triton_utils.requires_cuda_and_triton                triton (gpu)
    triton_utils.requires_gpu                            triton (gpu): its HAS_GPU needs triton
    common_device_type.instantiate_device_type_tests     TestXCPU: cpu; TestXCUDA: 1 GPU (gpu)
      + onlyCUDA / onlyCPU / onlyOn(...)                 only the instance of a listed device
      + deviceCountAtLeast(n)                            the CUDA instance, >= n GPUs
        onlyMPS / onlyXPU / onlyHPU                      not applicable (reported by one variant)

Device-type classes: every process gets both the CPU and the CUDA class (torch makes the CUDA
class only where CUDA is visible, and the cpu variant hides the GPUs), so collection sees the
same tests in every variant and the plugin's partition checks hold on a CPU host too. The
instance of an onlyX test for another device is removed: it exists once, as its own device's
instance. A test only for a device no variant offers stays once, in the CPU class, as not
applicable.

Multi-process tests (torch's MultiProcessTestCase and its subclasses, DTensorTestBase and
DynamoDistributedMultiProcTestCase among them) whose world size follows the visible device
count (`world_size` returns torch.accelerator.device_count(), say) need at least 2 GPUs: in the
1-GPU variant such a test runs one rank and checks nothing across ranks. `ranks_placed` moves
them to the smallest variant with at least 2 (the runner's lease makes exactly the variant's
GPUs visible). A class whose world size does not follow the device count (a fixed number,
e.g. `world_size = 2` with gloo on CPU) says otherwise and keeps its placement. A world size
below 1 fails the test, and so does a rank's test method that returns a value
(tools/runner/process/witness.py).

A raw `unittest.skipIf(not TEST_CUDA, ...)` is not mapped: unittest receives a bool, which
differs between a CPU and a GPU host, so no reading of it places the test the same everywhere.
Such a skip fails the cpu target until declared (expectations file) or marked.

No torch import here: the plugin installs the hook for every target, and targets that never
import torch must not pay for it.
"""

import contextlib
import functools
import importlib.abc
import inspect
import sys
from unittest import mock

from tools.hardware import variants
from tools.runner.process import witness
from tools.runner.session import markers, missing_imports

_NOT_APPLICABLE_ATTR = "__torch_test_not_applicable__"
_ONLY_ON_ATTR = "__torch_test_only_on__"
# Device types some variant runs its tests on: cpu (every variant's host) and cuda (GPU variants).
OFFERED_DEVICE_TYPES = frozenset({"cpu", "cuda"})
_TESTING = "torch.testing._internal."


def not_applicable(obj, why: str):
    """Records that `obj` needs hardware no variant offers; returns it."""
    setattr(obj, _NOT_APPLICABLE_ATTR, why)
    return obj


def not_applicable_reason(fn) -> str | None:
    """Why the test function `fn` applies to no variant, or None."""
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, _NOT_APPLICABLE_ATTR, None)


def at_least(gpus: int) -> int:
    """The GPUs of the smallest variant with at least `gpus` (upstream counts are minimums)."""
    counts = sorted(n for n in variants.VARIANTS.values() if n >= gpus)
    return counts[0] if counts else gpus  # none: the plugin's "no variant" error names it


def _marking(decorator, requirement):
    """torch's `decorator`, then our marker (or a not-applicable reason) on what it returns."""

    def apply(fn):
        decorated = decorator(fn)
        if isinstance(requirement, str):
            return not_applicable(decorated, requirement)
        return requirement(decorated)

    return apply


# ---- common_distributed


def _patch_common_distributed(module) -> None:
    skip_if_lt_x_gpu = module.skip_if_lt_x_gpu
    requires_nccl = module.requires_nccl
    requires_backend = module.requires_accelerator_dist_backend

    @functools.wraps(skip_if_lt_x_gpu)
    def skip_if_lt_x_gpu_marked(x, *args, **kwargs):
        return _marking(skip_if_lt_x_gpu(x, *args, **kwargs), markers.requires(gpus=at_least(x)))

    @functools.wraps(requires_nccl)
    def requires_nccl_marked(*args, **kwargs):
        return _marking(requires_nccl(*args, **kwargs), markers.requires_nccl)

    @functools.wraps(requires_backend)
    def requires_backend_marked(backends=None, *args, **kwargs):
        listed = module.ACCELERATOR_DIST_BACKENDS if backends is None else backends
        if "nccl" in listed:
            requirement = markers.requires_nccl
        else:
            requirement = f"needs one of the communication backends {list(listed)}"
        return _marking(requires_backend(backends, *args, **kwargs), requirement)

    module.skip_if_lt_x_gpu = skip_if_lt_x_gpu_marked
    module.requires_nccl = requires_nccl_marked
    module.requires_accelerator_dist_backend = requires_backend_marked
    _guard_multiprocess_test_case(module.MultiProcessTestCase)


def _guard_multiprocess_test_case(cls) -> None:
    """torch's MultiProcessTestCase proves a test only through ranks that ran it: with a world
    size below 1 (`torch.cuda.device_count()` where no GPU is visible) it spawns none, its
    return-code check returns early and the test passes; a rank's test method that returns a
    coroutine, a generator or a value ran no assertion. Both fail the test instead."""
    if getattr(cls, "__torch_test_guarded__", False):
        return
    start_processes, join_or_run = cls._start_processes, cls.join_or_run

    @functools.wraps(start_processes)
    def start_processes_guarded(self, proc):
        size = int(self.world_size)
        if size < 1:
            raise AssertionError(
                f"{self.id()}: world size {size}, so no rank would run the test (a world size "
                "that follows the visible device count needs a GPU variant)"
            )
        return start_processes(self, proc)

    @functools.wraps(join_or_run)
    def join_or_run_checked(self, fn):
        return join_or_run(self, witness.checked(fn))

    cls._start_processes = start_processes_guarded
    cls.join_or_run = join_or_run_checked
    cls.__torch_test_guarded__ = True


def ranks_placed(req: markers.Requirements, cls) -> markers.Requirements:
    """`req`, or at least 2 GPUs for a multi-process test whose world follows the devices."""
    if cls is None or req.min_gpus >= 2:
        return req
    module = sys.modules.get(_TESTING + "common_distributed")
    if module is None or not issubclass(cls, module.MultiProcessTestCase):
        return req
    if not _world_follows_devices(cls):
        return req
    return markers.Requirements(at_least(2), req.features)


@functools.cache
def _world_follows_devices(cls) -> bool:
    """Whether `cls().world_size` changes with the visible device count (asked of torch)."""
    world_size = inspect.getattr_static(cls, "world_size", None)
    if not isinstance(world_size, property):
        return False  # a class attribute: a fixed number
    import torch  # a subclass of torch's test case: torch is imported already

    instance = cls.__new__(cls)  # no __init__: nothing but the property runs
    sizes = set()
    for count in (1, 3):
        patches = [mock.patch.object(torch.cuda, "device_count", return_value=count)]
        if hasattr(torch, "accelerator"):
            patches.append(mock.patch.object(torch.accelerator, "device_count", return_value=count))
        try:
            with contextlib.ExitStack() as stack:
                for patch in patches:
                    stack.enter_context(patch)
                sizes.add(world_size.fget(instance))
        except Exception:  # a property that needs a set-up test: not read as following
            return False
    return len(sizes) > 1


# ---- common_utils, inductor_utils, triton_utils: module-level skip decorators


def _patch_common_utils(module) -> None:
    module.requires_cuda = _marking(module.requires_cuda, markers.requires(gpus=1))


def _patch_inductor_utils(module) -> None:
    for name in ("requires_gpu", "requires_triton"):
        factory = getattr(module, name)

        def marked(*args, _factory=factory, **kwargs):
            return _marking(_factory(*args, **kwargs), markers.requires_triton)

        setattr(module, name, marked)


def _patch_triton_utils(module) -> None:
    for name in ("requires_cuda_and_triton", "requires_gpu"):
        setattr(module, name, _marking(getattr(module, name), markers.requires_triton))


# ---- common_device_type


def _patch_common_device_type(module) -> None:
    only_on_call = module.onlyOn.__call__

    def recording_call(self, fn):
        wrapped = only_on_call(self, fn)
        listed = self.device_type
        setattr(wrapped, _ONLY_ON_ATTR, frozenset([listed] if isinstance(listed, str) else listed))
        return wrapped

    module.onlyOn.__call__ = recording_call

    # Collection must see the CUDA class in every variant (see the module docstring). Where
    # torch sees no CUDA, the class is made from a base whose primary device is named, not
    # asked of CUDA (torch's instantiation would initialise CUDA for it): its tests are
    # collected, and deselected, since only GPU variants run them.
    if module.CUDATestBase not in module.device_type_test_bases:

        class CUDATestBaseForCollection(module.CUDATestBase):
            primary_device = "cuda:0"

        # First, not last: torch's per-class setUpClass closure calls the loop's last base
        # (late binding), and in this process the classes that run are the CPU ones.
        module.device_type_test_bases.insert(0, CUDATestBaseForCollection)

    instantiate = module.instantiate_device_type_tests

    @functools.wraps(instantiate)
    def instantiate_marked(generic_test_class, scope, *args, **kwargs):
        before = dict(scope)
        instantiate(generic_test_class, scope, *args, **kwargs)
        for name, cls in scope.items():
            if before.get(name) is not cls and isinstance(cls, type):
                _place_device_class(cls)

    module.instantiate_device_type_tests = instantiate_marked


def _place_device_class(cls) -> None:
    device = cls.device_type
    if device == "cuda":
        markers.requires(gpus=1)(cls)
    for name, fn in list(vars(cls).items()):
        if not name.startswith("test"):
            continue
        devices = getattr(fn, "num_required_devices", 1)  # deviceCountAtLeast(n)
        if devices > 1:
            if device == "cuda":
                markers.requires(gpus=at_least(devices))(fn)
            elif device == "cpu":
                delattr(cls, name)  # one CPU device: only the CUDA instance can run it
                continue
        only_on = getattr(fn, _ONLY_ON_ATTR, None)
        if only_on is None or device in only_on:
            continue
        if only_on & OFFERED_DEVICE_TYPES or device != "cpu":
            delattr(cls, name)  # its own device's instance is the test
        else:
            not_applicable(fn, f"runs only on {', '.join(sorted(only_on))}")


# ---- the import hook

_PATCHES = {
    _TESTING + "common_distributed": _patch_common_distributed,
    _TESTING + "common_utils": _patch_common_utils,
    _TESTING + "inductor_utils": _patch_inductor_utils,
    _TESTING + "triton_utils": _patch_triton_utils,
    _TESTING + "common_device_type": _patch_common_device_type,
}


class _PatchingLoader:
    """Runs a module's loader, then its patch: before any importer sees the module."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):  # get_source, is_package, ...: inspect and linecache use them
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def install() -> None:
    """Adapts torch's testing decorators in this process (idempotent).

    Called at pytest_configure, before test modules are imported; a testing module imported
    already (by a conftest) is adapted in place.
    """
    missing_imports.record()  # an upstream file's guarded import may hide a missing dep
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _Finder())
