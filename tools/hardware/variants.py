"""Variant arithmetic: each variant's GPU count, and which variant a GPU count is.

Inside Bazel the GPU counts come from the torch_test macro (the target's spec.Spec), so a table
edit that changes no GPU count (a pool, a timeout) re-runs no test; outside Bazel (plain pytest,
the rig, bench/) they are read from the table (tools/hardware/table.py).
//test_utils/tests:test_hardware_table checks both agree.
"""

from tools.hardware import probe, spec


def _variant_gpus() -> dict[str, int]:
    declared = spec.spec().variants
    if declared is not None:
        return declared
    from tools.hardware import table  # plain pytest: read the table itself

    return {name: spec["gpus"] for name, spec in table.table()["VARIANTS"].items()}


# {variant: GPUs}, in the table's order.
VARIANTS = _variant_gpus()


def variant_for_gpus(gpus: int) -> str | None:
    """The variant of exactly `gpus` GPUs, or None."""
    return next((name for name, count in VARIANTS.items() if count == gpus), None)


def gpus_needed(variant: str) -> int:
    return VARIANTS[_checked(variant)]


def declared_gpu_counts() -> str:
    """'cpu=0, gpu=1, ...': the table, for error messages."""
    return ", ".join(f"{name}={count}" for name, count in VARIANTS.items())


def current_variant() -> str:
    return _checked(spec.spec().variant)


def _checked(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return variant


def device_type() -> str:
    """The torch device type tests of the current variant run on."""
    return "cuda" if gpus_needed(current_variant()) else "cpu"


def cannot_run(variant: str) -> str | None:
    """The error of a run of `variant` on this host (the runner's and plain pytest's), or None."""
    missing = missing_hardware(variant)
    return f"cannot run on this host: {missing}" if missing else None


def missing_hardware(variant: str) -> str | None:
    """Why this host cannot run `variant` (e.g. 'needs 2 GPUs, found 0'), or None if it can."""
    need = gpus_needed(variant)
    if need == 0:
        return None
    found = probe.visible_gpu_count()
    if found < need:
        return f"variant {variant!r} needs {need} GPU{'s' if need > 1 else ''}, found {found}"
    return None
