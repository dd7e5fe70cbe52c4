"""pytest plugin: run only the current variant's tests, and never report a hollow pass.

Loaded by the Bazel runner (and by the repository's conftest.py for plain pytest runs).
- Tests whose hardware markers (test_utils.hardware) belong to another variant are deselected,
  so each test runs in exactly one Bazel target.
- A test whose variant has no Bazel target for its source fails the run: the variants of a
  source must partition its tests (TORCH_TEST_DECLARED_VARIANTS, set by the torch_test macro).
  So does a test whose GPU count has no variant at all (@requires_gpus(3)).
- Each variant's features (nccl, triton: TORCH_TEST_DECLARED_FEATURES, from torch_test's nccl /
  triton arguments, which become platform constraints) must be exactly those its tests'
  markers use: a @requires_nccl test in a target without nccl would run on hosts without NCCL.
  Every target of a source checks every variant (collection sees all tests), so the cpu
  target on a CPU host already catches a GPU variant's mismatch.
- torch's own test decorators (skip_if_lt_x_gpu, requires_nccl, onlyCUDA, ...) count as markers:
  test_utils/upstream_decorators.py adapts them when applied. A test for a device no variant
  offers (onlyXPU, xccl) is skipped at setup as "not applicable to this hardware table", with
  the JUnit property torch_test.not_applicable, by the source's first variant; the skip audit
  accepts exactly those skips.
- A variant whose hardware is missing fails the whole run ("needs 2 GPUs, found 0").
- A process sharing GPUs with other tests (a lease of part of each GPU) caps its memory.
- A skipped test fails the run: a skip hides missing hardware or packages, which must be
  declared with markers (Bazel then schedules or skips the whole target) instead, or, for
  tests from elsewhere, in the target's expectations file. test_utils.outcome_audit judges
  every outcome (skips, xfails, declared outcomes, tests defined but never run).
"""

import os

import pytest

from test_utils import expectations, hardware, outcome_audit, upstream_decorators

_REQ_KEY = pytest.StashKey[hardware.Requirements]()


def requirements(item) -> hardware.Requirements:
    return item.stash[_REQ_KEY]


def pytest_report_header(config):
    return f"torch_test variant: {hardware.current_variant()}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    variant = hardware.current_variant()
    keep, drop = [], []
    for item in items:
        req = hardware.requirements_of(getattr(item, "obj", None), getattr(item, "cls", None))
        if _mark_not_applicable(item):
            req = hardware.Requirements(gpus=hardware.gpus_needed(_not_applicable_variant()))
        item.stash[_REQ_KEY] = req
        (keep if req.variant == variant else drop).append(item)
    homeless = [
        f"{i.nodeid} (needs {requirements(i).min_gpus} GPUs)"
        for i in items
        if requirements(i).variant is None
    ]
    if homeless:
        raise pytest.UsageError(
            "no variant has exactly the GPUs these tests need (tools/build_defs/variants.bzl: "
            f"{hardware.declared_gpu_counts()}):\n  " + "\n  ".join(homeless)
        )
    orphans = _tests_without_target(items)
    if orphans:
        raise pytest.UsageError(
            "these tests belong to variants this source declares no target for "
            f"(declared: {os.environ[hardware.DECLARED_VARIANTS_ENV]}):\n  " + "\n  ".join(orphans)
        )
    mismatch = _feature_mismatch(items)
    if mismatch:
        raise pytest.UsageError(mismatch)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _mark_not_applicable(item) -> bool:
    """Marks a test that needs a device no variant offers; True if it does."""
    why = upstream_decorators.not_applicable_reason(getattr(item, "obj", None))
    if why is None:
        return False
    item.add_marker(pytest.mark.torch_test_not_applicable(why))
    item.user_properties.append((outcome_audit.NOT_APPLICABLE_PROPERTY, why))
    return True


def _not_applicable_variant() -> str:
    """The variant that reports not-applicable tests: the source's first in the table's order,
    so that the report comes from a target every host that runs the source runs."""
    declared = os.environ.get(hardware.DECLARED_VARIANTS_ENV)
    if not declared:
        return "cpu"
    return next(v for v in hardware.VARIANTS if v in declared.split(","))


def _tests_without_target(items) -> list[str]:
    declared = os.environ.get(hardware.DECLARED_VARIANTS_ENV)
    if not declared:
        return []  # plain pytest outside Bazel
    variants = set(declared.split(","))
    return [
        f"{i.nodeid} ({requirements(i).variant})"
        for i in items
        if requirements(i).variant not in variants
    ]


def _feature_mismatch(items) -> str | None:
    """Why some variant's declared features differ from its tests' markers, or None."""
    declared_env = os.environ.get(hardware.DECLARED_FEATURES_ENV)
    if declared_env is None:
        return None  # plain pytest outside Bazel
    # "cpu=,gpu=nccl+triton,...": every declared variant of the source.
    declared = {
        variant: set(filter(None, features.split("+")))
        for variant, features in (pair.split("=") for pair in declared_env.split(","))
    }
    problems = []
    for variant, features in declared.items():
        ours = [i for i in items if requirements(i).variant == variant]
        for feature in hardware.FEATURES:
            marked = [i.nodeid for i in ours if feature in requirements(i).features]
            if marked and feature not in features:
                problems.append(
                    f"tests marked @requires_{feature} run in variant {variant!r}, but its "
                    f"torch_test does not list {variant!r} in {feature} = [...] (so the target "
                    f"does not need has_{feature}):\n  " + "\n  ".join(marked)
                )
            if feature in features and not marked:
                problems.append(
                    f"torch_test lists {variant!r} in {feature} = [...], but none of the "
                    f"variant's tests is marked @requires_{feature}: remove it (the target would "
                    f"needlessly require has_{feature})"
                )
    return "\n".join(problems) or None


def pytest_collection_finish(session):
    if not session.items:
        return
    missing = hardware.missing_hardware(hardware.current_variant())
    if missing:
        pytest.exit(f"cannot run on this host: {missing}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    marker = item.get_closest_marker(outcome_audit.NOT_APPLICABLE_MARK)
    if marker is not None:  # before fixtures: a class's setUpClass may need the missing device
        pytest.skip(outcome_audit.NOT_APPLICABLE_PREFIX + marker.args[0])
    req = requirements(item)
    if req.nccl and not hardware.has_nccl():
        pytest.fail("test needs the NCCL backend, which this torch build lacks", pytrace=False)
    if req.triton and not hardware.has_triton():
        pytest.fail("test needs triton with a GPU, which this host lacks", pytrace=False)


def pytest_configure(config):
    # Before any test module imports torch's testing decorators (no torch import here).
    upstream_decorators.install()
    config.addinivalue_line(
        "markers",
        f"{outcome_audit.NOT_APPLICABLE_MARK}(why): the test needs hardware no variant offers",
    )
    config.pluginmanager.register(_outcome_audit(), "torch_test_outcome_audit")
    hardware.cap_gpu_memory()


def _outcome_audit() -> outcome_audit.OutcomeAudit:
    """The audit, with the target's declared outcomes (torch_test's expectations) if any."""
    variant = hardware.current_variant()
    source = os.environ.get(expectations.ENV, "")
    entries = []
    if source:
        declared = os.environ.get(hardware.DECLARED_VARIANTS_ENV)
        variants = declared.split(",") if declared else list(hardware.VARIANTS)
        try:
            entries = expectations.applicable(expectations.load(source, variants), variant)
        except expectations.ExpectationError as error:
            raise pytest.UsageError(str(error)) from error
    return outcome_audit.OutcomeAudit(
        variant, lambda item: requirements(item).variant, entries, source
    )
