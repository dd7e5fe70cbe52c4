"""What hardware a test needs, declared once on the test and read by the runner.

A test's requirements place it in exactly one Bazel variant of its source file: the variant
of tools/build_defs/variants.bzl with exactly the GPUs it needs (unmarked tests: cpu, 0 GPUs;
@requires_gpus(2): multi_gpu; @requires_nccl / @requires_triton alone: 1 GPU, gpu). A count no
variant has (@requires_gpus(3)) fails collection.
Markers work on test functions, unittest methods and whole classes; class and method markers
merge (the larger GPU count wins). NCCL and triton both need a GPU, so on their own they imply
one; they are the "features" of the table, and a target must declare exactly the features its
tests' markers use (torch_test's nccl / triton arguments; checked by the pytest plugin).

Inside Bazel the variants and GPU counts come from the torch_test macro (VARIANTS_ENV), so a
table edit that changes no GPU count (a pool, a timeout) re-runs no test; outside Bazel (plain
pytest) they are read from the table. //test_utils/tests:test_hardware_table checks both agree.

Whether this host has the GPUs is decided once per test: host_gpu_count() asks nvidia-smi once
and exports the answer (HOST_GPUS_ENV) to the processes the test starts (e.g. its ranks).
"""

import dataclasses
import functools
import importlib.util
import os
import shutil
import subprocess

VARIANT_ENV = "TORCH_TEST_VARIANT"
# Every variant's GPU count, "cpu=0,gpu=1,...": set by the torch_test macro from the table.
VARIANTS_ENV = "TORCH_TEST_VARIANTS"
DECLARED_VARIANTS_ENV = "TORCH_TEST_DECLARED_VARIANTS"
# The features (nccl, triton) the torch_test target declares for its variant, comma-separated.
DECLARED_FEATURES_ENV = "TORCH_TEST_DECLARED_FEATURES"
# This host's GPU count once known (set by host_gpu_count for child processes). The rig
# (tools/remote) sets it with --test_env to simulate a GPU pool's hosts on CPU workers.
HOST_GPUS_ENV = "TORCH_TEST_HOST_GPUS"
_ATTR = "__torch_test_requirements__"


def _variant_gpus() -> dict[str, int]:
    declared = os.environ.get(VARIANTS_ENV)
    if declared:
        return {name: int(n) for name, n in (pair.split("=") for pair in declared.split(","))}
    from test_utils import hardware_table  # plain pytest: read the table itself

    return {name: spec["gpus"] for name, spec in hardware_table.table()["VARIANTS"].items()}


# {variant: GPUs}, in the table's order.
VARIANTS = _variant_gpus()
# The table's FEATURES: fields of Requirements, marked @requires_<feature>, offered by
# has_<feature> (checked against the table by //test_utils/tests:test_hardware_table).
FEATURES = ("nccl", "triton")


@dataclasses.dataclass(frozen=True)
class Requirements:
    gpus: int = 0
    nccl: bool = False
    triton: bool = False

    def merged(self, other: "Requirements") -> "Requirements":
        return Requirements(
            gpus=max(self.gpus, other.gpus),
            nccl=self.nccl or other.nccl,
            triton=self.triton or other.triton,
        )

    @property
    def min_gpus(self) -> int:
        return max(self.gpus, 1 if (self.nccl or self.triton) else 0)

    @property
    def variant(self) -> str | None:
        """The variant with exactly min_gpus GPUs, or None if the table has none."""
        return variant_for_gpus(self.min_gpus)

    @property
    def features(self) -> frozenset[str]:
        return frozenset(f for f in FEATURES if getattr(self, f))


def variant_for_gpus(gpus: int) -> str | None:
    """The variant of exactly `gpus` GPUs, or None."""
    return next((name for name, count in VARIANTS.items() if count == gpus), None)


def gpus_needed(variant: str) -> int:
    return VARIANTS[_checked(variant)]


def declared_gpu_counts() -> str:
    """'cpu=0, gpu=1, ...': the table, for error messages."""
    return ", ".join(f"{name}={count}" for name, count in VARIANTS.items())


def requires(*, gpus: int = 0, nccl: bool = False, triton: bool = False):
    """Decorator recording hardware needs on a test function or class."""
    if gpus < 0:
        raise ValueError(f"requires(gpus={gpus}): GPU count must be >= 0")
    new = Requirements(gpus=gpus, nccl=nccl, triton=triton)

    def mark(obj):
        # vars(), not getattr(): a subclass must not re-merge its parent's marker into itself.
        if isinstance(obj, type):
            own = vars(obj).get(_ATTR, Requirements())
        else:
            own = getattr(obj, _ATTR, Requirements())
        setattr(obj, _ATTR, own.merged(new))
        return obj

    return mark


def requires_gpus(n: int):
    return requires(gpus=n)


requires_nccl = requires(nccl=True)
requires_triton = requires(triton=True)


def requirements_of(fn, cls=None) -> Requirements:
    """Requirements of a test: its class's markers (inherited ones too) merged with its own."""
    req = Requirements()
    if cls is not None:
        for klass in reversed(cls.__mro__):
            req = req.merged(vars(klass).get(_ATTR, Requirements()))
    fn = getattr(fn, "__func__", fn)
    return req.merged(getattr(fn, _ATTR, Requirements()))


def current_variant() -> str:
    return _checked(os.environ.get(VARIANT_ENV, "cpu"))


def _checked(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return variant


def device_type() -> str:
    """The torch device type tests of the current variant run on."""
    return "cuda" if gpus_needed(current_variant()) else "cpu"


def visible_gpu_count() -> int:
    """GPUs this process may use, without creating a CUDA context in it.

    Honours CUDA_VISIBLE_DEVICES (set by the GPU lease). Asks nvidia-smi rather than torch so
    that a parent process stays CUDA-free and can still fork or lease devices afterwards.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
        return min(len(listed), host_gpu_count())
    return host_gpu_count()


@functools.cache
def host_gpu_count() -> int:
    """GPUs on this host: asked of nvidia-smi once, then inherited by child processes."""
    known = os.environ.get(HOST_GPUS_ENV)
    if known is None:
        known = str(_nvidia_smi_gpus())
        os.environ[HOST_GPUS_ENV] = known
    return int(known)


def nvidia_smi(*args: str) -> str | None:
    """nvidia-smi's output for `args`, or None where there is none (no driver, or it failed)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout


def _nvidia_smi_gpus() -> int:
    listing = nvidia_smi("-L") or ""
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def has_triton() -> bool:
    """True where triton is installed and has a GPU to compile for."""
    if importlib.util.find_spec("triton") is None:
        return False
    from torch.utils._triton import has_triton as torch_has_triton

    return torch_has_triton()


def has_nccl() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_nccl_available()


def missing_hardware(variant: str) -> str | None:
    """Why this host cannot run `variant` (e.g. 'needs 2 GPUs, found 0'), or None if it can."""
    need = gpus_needed(variant)
    if need == 0:
        return None
    found = visible_gpu_count()
    if found < need:
        return f"variant {variant!r} needs {need} GPU{'s' if need > 1 else ''}, found {found}"
    return None


MEMORY_FRACTION_ENV = "TORCH_TEST_GPU_MEMORY_FRACTION"


def cap_gpu_memory() -> None:
    """Keeps this process within its share of GPUs that the lease lets several tests share.

    tools/runner/gpu_lease.py exports the share when the test holds part of its GPUs. The cap is
    queued for CUDA's lazy initialisation, so a process that never touches CUDA (e.g. the
    parent of rank processes) creates no CUDA context for it.
    """
    fraction = os.environ.get(MEMORY_FRACTION_ENV)
    if not fraction:
        return
    import torch

    def apply() -> None:
        for device in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(float(fraction), device)

    if torch.cuda.is_initialized():
        apply()
    else:
        torch.cuda._lazy_call(apply)  # runs inside torch.cuda's lazy init, after the context
