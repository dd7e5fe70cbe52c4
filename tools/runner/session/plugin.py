"""pytest plugin: run only the current variant's tests, and never report a hollow pass.

Loaded by the Bazel runner (and by the repository's conftest.py for plain pytest runs).
- Tests whose hardware markers (test_utils.hardware) belong to another variant are deselected,
  so each test runs in exactly one Bazel target.
- A test whose variant has no Bazel target for its source fails the run: the variants of a
  source must partition its tests (the spec's declared_variants, from the torch_test macro).
  So does a test whose GPU count has no variant at all (@requires_gpus(3)).
- Each variant's features (nccl, triton: the spec's declared_features, from torch_test's nccl /
  triton arguments, which become platform constraints) must be exactly those its tests'
  markers use: a @requires_nccl test in a target without nccl would run on hosts without NCCL.
  Every target of a source checks every variant (collection sees all tests), so the cpu
  target on a CPU host already catches a GPU variant's mismatch.
- torch's own test decorators (skip_if_lt_x_gpu, requires_nccl, onlyCUDA, ...) count as markers:
  tools/runner/session/upstream_decorators.py adapts them when applied. A test for a device no
  variant
  offers (onlyXPU, xccl) is skipped at setup as "not applicable to this hardware table", with
  the JUnit property torch_test.not_applicable, by the source's first variant; the skip audit
  accepts exactly those skips.
- A variant whose hardware is missing fails the whole run ("needs 2 GPUs, found 0").
- A process sharing GPUs with other tests (a lease of part of each GPU) caps its memory.
- Inductor's CPU vector-ISA probes are kept per host (tools/runner/process/vec_isa_memo.py),
  and its kernels are keyed without the sandbox's path (tools/runner/process/kernel_cache.py).
- A skipped test fails the run: a skip hides missing hardware or packages, which must be
  declared with markers (Bazel then schedules or skips the whole target) instead, or, for
  tests from elsewhere, in the target's expectations file. tools.runner.session.outcome_audit judges
  every outcome (skips, xfails, declared outcomes, tests defined but never run).
"""

import sys

import pytest

from tools.hardware import probe, spec, variants
from tools.results import record
from tools.runner.process import events, kernel_cache, memory_cap, vec_isa_memo, witness
from tools.runner.session import (
    expectations,
    markers,
    outcome_audit,
    placement,
    upstream_decorators,
)

_REQ_KEY = pytest.StashKey[markers.Requirements]()
# The plugin this one registers; the runner refuses `-p no:` of it (refused_options.py).
AUDIT_PLUGIN = "torch_test_outcome_audit"


def requirements(item) -> markers.Requirements:
    return item.stash[_REQ_KEY]


def placed(item) -> markers.Requirements:
    """The item's requirements, and its placement as not applicable, computed once: by the
    selection below, or by the inventory for an item a conftest removed before it ran."""
    req = item.stash.get(_REQ_KEY, None)
    if req is None:
        req = markers.requirements_of(getattr(item, "obj", None), getattr(item, "cls", None))
        req = upstream_decorators.ranks_placed(req, getattr(item, "cls", None))
        if _mark_not_applicable(item):
            req = markers.Requirements(gpus=variants.gpus_needed(_not_applicable_variant()))
        item.stash[_REQ_KEY] = req
    return req


def not_applicable(item) -> str | None:
    """Why torch's decorators place the item on hardware no variant offers, or None."""
    return item.stash.get(outcome_audit.NOT_APPLICABLE, None)


def pytest_report_header(config):
    return f"torch_test variant: {variants.current_variant()}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    variant = variants.current_variant()
    keep, drop = [], []
    for item in items:
        (keep if placed(item).variant == variant else drop).append(item)
    placement.report(config, {i.nodeid: requirements(i).variant for i in items})
    homeless = [
        f"{i.nodeid} (needs {requirements(i).min_gpus} GPUs)"
        for i in items
        if requirements(i).variant is None
    ]
    if homeless:
        raise pytest.UsageError(
            "no variant has exactly the GPUs these tests need (tools/build_defs/variants.bzl: "
            f"{variants.declared_gpu_counts()}):\n  " + "\n  ".join(homeless)
        )
    orphans = _tests_without_target(items)
    if orphans:
        raise pytest.UsageError(
            "these tests belong to variants this source declares no target for "
            f"(declared: {spec.spec().declared_variants}):\n  " + "\n  ".join(orphans)
        )
    mismatch = _feature_mismatch(items)
    if mismatch:
        raise pytest.UsageError(mismatch)
    witness.send(events.PLUGIN, what="placed")  # the runner fails a session this never ran in
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _mark_not_applicable(item) -> bool:
    """Places a test that needs a device no variant offers as not applicable; True if it does.

    Only torch's decorators (upstream_decorators) say so: a marker of the test's own would let
    any test turn its skip into an accepted one.
    """
    why = upstream_decorators.not_applicable_reason(getattr(item, "obj", None))
    if why is None:
        return False
    item.stash[outcome_audit.NOT_APPLICABLE] = why
    item.user_properties.append((outcome_audit.NOT_APPLICABLE_PROPERTY, why))
    return True


def _not_applicable_variant() -> str:
    """The variant that reports not-applicable tests: the source's first in the table's order,
    so that the report comes from a target every host that runs the source runs."""
    declared = _declared_variants()
    if not declared:
        return "cpu"
    return next(v for v in variants.VARIANTS if v in declared)


def _tests_without_target(items) -> list[str]:
    declared = spec.spec().declared_variants
    if declared is None:
        return []  # plain pytest outside Bazel
    targets = set(declared)
    return [
        f"{i.nodeid} ({requirements(i).variant})"
        for i in items
        if requirements(i).variant not in targets
    ]


def _feature_mismatch(items) -> str | None:
    """Why some variant's declared features differ from its tests' markers, or None."""
    declared_features = spec.spec().declared_features
    if declared_features is None:
        return None  # plain pytest outside Bazel
    # {"cpu": [], "gpu": ["nccl", "triton"], ...}: every declared variant of the source.
    declared = {variant: set(features) for variant, features in declared_features.items()}
    problems = []
    for variant, features in declared.items():
        ours = [i for i in items if requirements(i).variant == variant]
        for feature in markers.FEATURES:
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
    refused = variants.cannot_run(variants.current_variant())
    if refused:
        pytest.exit(refused, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    why = item.stash.get(outcome_audit.NOT_APPLICABLE, None)
    if why is not None:  # before fixtures: a class's setUpClass may need the missing device
        pytest.skip(record.NOT_APPLICABLE_PREFIX + why)
    for feature in sorted(requirements(item).features):
        lacking = probe.lacks(feature)
        if lacking:
            pytest.fail(f"test needs {lacking}", pytrace=False)


def pytest_configure(config):
    # Before any test module imports torch's testing decorators (no torch import here).
    upstream_decorators.install()
    config.pluginmanager.register(_outcome_audit(), AUDIT_PLUGIN)
    witness.send(events.PLUGIN, what="configured")  # the runner fails a session this never ran in
    memory_cap.cap_gpu_memory()
    vec_isa_memo.watch()
    kernel_cache.watch()


def pytest_unconfigure(config):
    line = vec_isa_memo.summary()
    if line:
        print(f"\n{line}", file=sys.stderr)  # after pytest's last progress line


def _declared_variants() -> list[str] | None:
    """The variants of the source's targets (torch_test), or None under plain pytest."""
    return spec.spec().declared_variants


def _outcome_audit() -> outcome_audit.OutcomeAudit:
    """The audit, with the target's declared outcomes (torch_test's expectations) if any."""
    variant = variants.current_variant()
    source = spec.spec().expectations or ""
    entries = []
    if source:
        declared = _declared_variants() or list(variants.VARIANTS)
        try:
            entries = expectations.read(source, declared, variant, spec.spec().cached)
        except expectations.ExpectationError as error:  # one line, the file's and the fix
            raise pytest.UsageError(str(error)) from error
    return outcome_audit.OutcomeAudit(
        variant, lambda item: requirements(item).variant, entries, source
    )
