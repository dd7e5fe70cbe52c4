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
- A variant whose hardware is missing fails the whole run ("needs 2 GPUs, found 0").
- A process sharing GPUs with other tests (a lease of part of each GPU) caps its memory.
- A skipped test fails the run: a skip hides missing hardware or packages, which must be
  declared with markers (Bazel then schedules or skips the whole target) instead. So do an
  xfail that never ran its test (`run=False`, or `pytest.xfail()` during setup), a module
  skipped at import (`pytest.importorskip` at module level; the reason names the module) and
  an unexpected pass of an xfail-marked test (XPASS, as if every xfail were strict). An
  expected failure that ran and failed is tested behaviour and passes.
"""

import os

import pytest

from test_utils import hardware
from tools.hardware import envvars, memory_cap, probe, variants

_REQ_KEY = pytest.StashKey[hardware.Requirements]()


def requirements(item) -> hardware.Requirements:
    return item.stash[_REQ_KEY]


def pytest_report_header(config):
    return f"torch_test variant: {variants.current_variant()}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    variant = variants.current_variant()
    keep, drop = [], []
    for item in items:
        req = hardware.requirements_of(getattr(item, "obj", None), getattr(item, "cls", None))
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
            f"{variants.declared_gpu_counts()}):\n  " + "\n  ".join(homeless)
        )
    orphans = _tests_without_target(items)
    if orphans:
        raise pytest.UsageError(
            "these tests belong to variants this source declares no target for "
            f"(declared: {os.environ[envvars.DECLARED_VARIANTS]}):\n  " + "\n  ".join(orphans)
        )
    mismatch = _feature_mismatch(items)
    if mismatch:
        raise pytest.UsageError(mismatch)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _tests_without_target(items) -> list[str]:
    declared = os.environ.get(envvars.DECLARED_VARIANTS)
    if not declared:
        return []  # plain pytest outside Bazel
    targets = set(envvars.decode(declared))
    return [
        f"{i.nodeid} ({requirements(i).variant})"
        for i in items
        if requirements(i).variant not in targets
    ]


def _feature_mismatch(items) -> str | None:
    """Why some variant's declared features differ from its tests' markers, or None."""
    declared_env = os.environ.get(envvars.DECLARED_FEATURES)
    if declared_env is None:
        return None  # plain pytest outside Bazel
    # {"cpu": [], "gpu": ["nccl", "triton"], ...}: every declared variant of the source.
    declared = {
        variant: set(features) for variant, features in envvars.decode(declared_env).items()
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
    refused = variants.cannot_run(variants.current_variant())
    if refused:
        pytest.exit(refused, returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_runtest_setup(item):
    for feature in sorted(requirements(item).features):
        lacking = probe.lacks(feature)
        if lacking:
            pytest.fail(f"test needs {lacking}", pytrace=False)


class _SkipAudit:
    def __init__(self):
        self.skipped = []
        self.xpassed = []
        self.ran = 0

    def pytest_collectreport(self, report):
        if report.skipped:  # a whole module, e.g. pytest.importorskip at module level
            self.skipped.append((report.nodeid, _skip_reason(report)))

    def pytest_runtest_logreport(self, report):
        xfail = getattr(report, "wasxfail", None)
        if report.skipped and (xfail is None or report.when == "setup"):
            # A plain skip, or an xfail that stopped the test before it ran (run=False).
            self.skipped.append((report.nodeid, xfail or _skip_reason(report)))
        elif report.passed and xfail is not None and report.when == "call":
            self.xpassed.append((report.nodeid, xfail))
        elif report.when == "call":
            self.ran += 1

    def pytest_sessionfinish(self, session, exitstatus):
        if (self.skipped or self.xpassed) and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if self.xpassed:
            terminalreporter.section("unexpected passes (XPASS) fail this target", red=True)
            for nodeid, reason in self.xpassed:
                terminalreporter.line(f"{nodeid}: expected to fail ({reason}) but passed")
            terminalreporter.line("Remove the xfail marker, or fix what it expects.")
        if not self.skipped:
            return
        terminalreporter.section("skipped tests fail this target", red=True)
        for nodeid, reason in self.skipped:
            terminalreporter.line(f"{nodeid}: {reason}")
        terminalreporter.line(
            "Declare hardware with test_utils.hardware markers instead of skipping; "
            f"{self.ran} test(s) ran, {len(self.skipped)} skipped."
        )


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def pytest_configure(config):
    config.pluginmanager.register(_SkipAudit(), "torch_test_skip_audit")
    memory_cap.cap_gpu_memory()
