"""Greens the runner must not grant: each shape rewrites or bypasses what pytest reports, and
each fails, through the real runner, because the verdict comes from what the runner's witness
saw each body (and each rank) do (tools/runner/process/witness.py, tools/runner/verdict.py).

Every fixture's pytest run alone says passed, or exits 0.
"""

import textwrap

import pytest

from tools.results import record
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests
from tools.runner.tests.runner_subprocess import run_fixture as run


def assert_fails(result, case: str, outcome: str, *needles):
    """The target failed, and its record judged `case` so."""
    assert result.returncode != 0, result.output
    assert result.record is not None, result.output
    assert result.record.verdict == record.FAILED
    got = result.record.cases.get(case)
    assert got is not None and got.outcome == outcome, (got, result.output)
    for needle in needles:
        assert needle in got.detail, (got, result.output)


FAILING = """
    def test_fails():
        assert 1 == 2, "the real failure"
    """

# 1. A body that never ran, or a failure rewritten.

PYFUNC_CALL_SKIPS_THE_BODY = """
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        return True  # "handled": the test function is never called
    """

REPORT_REWRITTEN = """
    import pytest

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item, call):
        report = yield
        if report.failed:
            report.outcome = "passed"
            report.longrepr = None
        return report
    """

EXIT_STATUS_REWRITTEN = """
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        session.exitstatus = 0
    """

ATEXIT_EXITS_0 = """
    import atexit
    import os

    atexit.register(os._exit, 0)

    def test_fails():
        assert 1 == 2, "the real failure"
    """

RUN_RETURNS_EARLY = """
    import unittest

    class NeedsAGpu(unittest.TestCase):
        def run(self, result=None):
            return  # "skip on hosts without a GPU", as some ML code bases do

    class TestT(NeedsAGpu):
        def test_never(self):
            raise AssertionError("never reached")
    """

ASYNC_BEHIND_A_DROPPING_WRAPPER = """
    import functools

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            fn(*args, **kwargs)  # the coroutine is created and dropped
        return wrapper

    @logged
    async def test_async():
        raise AssertionError("never awaited")
    """

THREAD_BESIDE_A_DECLARED_FAIL = """
    import threading

    def test_declared():
        t = threading.Thread(target=lambda: 1 / 0)
        t.start()
        t.join()
        raise AssertionError("the declared failure of this test")
    """


@pytest.mark.parametrize(
    "files, body, case, outcome, needle",
    [
        (
            {"conftest.py": PYFUNC_CALL_SKIPS_THE_BODY},
            "def test_ok():\n    raise AssertionError('never reached')\n",
            "test_fixture.py::test_ok",
            "failed",
            "its body never ran",
        ),
        ({"conftest.py": REPORT_REWRITTEN}, FAILING, "test_fixture.py::test_fails", "failed", ""),
        (
            {"conftest.py": EXIT_STATUS_REWRITTEN},
            FAILING,
            "test_fixture.py::test_fails",
            "failed",
            "AssertionError: the real failure",
        ),
        ({}, ATEXIT_EXITS_0, "test_fixture.py::test_fails", "failed", "the real failure"),
        ({}, RUN_RETURNS_EARLY, "test_fixture.py::TestT::test_never", "failed", "never ran"),
        (
            {},
            ASYNC_BEHIND_A_DROPPING_WRAPPER,
            "test_fixture.py::test_async",
            "failed",
            "coroutine nobody awaited",
        ),
    ],
    ids=[
        "pyfunc-call-returns-true",
        "makereport-rewrites-failure",
        "sessionfinish-sets-status-0",
        "atexit-os-exit-0",
        "run-returns-early",
        "async-behind-dropping-wrapper",
    ],
)
def test_a_rewritten_or_bypassed_body_fails(tmp_path, files, body, case, outcome, needle):
    assert_fails(run(tmp_path, body, files), case, outcome, needle)


DECLARED_FAIL = """
    [[expect]]
    test = "test_fixture.py::test_declared"
    outcome = "fail"
    reason = "a declared failure"
    match = "AssertionError: the declared failure"
    """


def declared(tmp_path) -> dict:
    """The runner's environment with DECLARED_FAIL as the target's expectations file."""
    (tmp_path / "expect.toml").write_text(textwrap.dedent(DECLARED_FAIL))
    return bazel_env(tmp_path, dict(expectations=str(tmp_path / "expect.toml")))


def test_a_thread_exception_fails_a_declared_fail(tmp_path):
    result = run(tmp_path, THREAD_BESIDE_A_DECLARED_FAIL, env=declared(tmp_path))
    assert_fails(result, "test_fixture.py::test_declared", "failed", "ZeroDivisionError")


def test_the_declared_fail_alone_is_green(tmp_path):
    """The control of the above: without the thread, the declaration holds."""
    body = 'def test_declared():\n    raise AssertionError("the declared failure of this test")\n'
    result = run(tmp_path, body, env=declared(tmp_path))
    assert result.returncode == 0, result.output
    assert result.record.cases["test_fixture.py::test_declared"].outcome == "declared_fail"


# 1d. The outcome audit unregistered: the skip it would have failed is the runner's to judge.

UNREGISTERS_THE_AUDIT = """
    def pytest_configure(config):
        config.pluginmanager.unregister(name="torch_test_outcome_audit")
    """

SKIPS = """
    import pytest

    def test_skips():
        pytest.skip("no reason anyone declared")
    """


def test_a_skip_fails_with_the_audit_unregistered(tmp_path):
    result = run(tmp_path, SKIPS, {"conftest.py": UNREGISTERS_THE_AUDIT})
    assert_fails(result, "test_fixture.py::test_skips", "skipped", "no reason anyone declared")


# 2. Our plugins switched off through doors the option check does not see.

PASSES = "def test_ok():\n    pass\n"


# (`-o addopts=...`, the other door, is refused: tools/runner/tests/test_user_filter.py.)
def test_a_skip_fails_with_the_audit_switched_off(tmp_path):
    files = {"pytest.ini": "[pytest]\naddopts = -p no:torch_test_outcome_audit\n"}
    result = run(tmp_path, SKIPS, files)
    assert_fails(result, "test_fixture.py::test_skips", "skipped", "no reason anyone declared")


UNREGISTERS_OUR_PLUGIN = """
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_configure(config):
        config.pluginmanager.unregister(name="tools.runner.session.plugin")
    """


def test_a_session_without_our_plugin_fails(tmp_path):
    result = run(tmp_path, PASSES, {"conftest.py": UNREGISTERS_OUR_PLUGIN})
    assert result.returncode != 0, result.output
    assert any("pytest plugin" in p and "never placed" in p for p in result.record.problems)


# 4. Packed targets keyed by path; ids that depend on the process.

HIDDEN_BY_INIT = """
    class TestSame:
        def __init__(self):
            pass

        def test_x(self):
            raise AssertionError("never collected")
    """

COLLECTED = """
    class TestSame:
        def test_x(self):
            pass
    """


def test_a_packed_file_cannot_cover_its_namesake(tmp_path):
    """Two files named alike in two folders: one's uncollectable test is its own."""
    for folder in ("a", "b"):  # packages, as Bazel's runfiles make them
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    other = write_tests(tmp_path / "b", HIDDEN_BY_INIT, "test_same.py")
    first = write_tests(tmp_path / "a", COLLECTED, "test_same.py")
    result = run_runner(first, bazel_env(tmp_path), args=[str(other)])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    rec = record.read(tmp_path / "test.xml")
    assert any("b/test_same.py::TestSame::test_x" in line for line in rec.never_collected), output


PER_PROCESS_IDS = """
    import os

    import pytest

    @pytest.mark.parametrize("where", [os.environ["TMPDIR"] + f"/{i}" for i in range(4)])
    def test_param(where):
        pass
    """


def test_ids_that_follow_the_process_fail_every_shard(tmp_path):
    for index in (0, 1):
        env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=index)
        result = run(tmp_path, PER_PROCESS_IDS, env=env)
        assert result.returncode != 0, result.output
        assert result.record.never_run, result.output


# torch's MultiProcessTestCase: a rank that leaves before its assertions.

RANK_EXITS_0 = """
    import os

    from torch.testing._internal.common_distributed import MultiProcessTestCase

    class TestRanks(MultiProcessTestCase):
        @property
        def world_size(self):
            return 2

        def setUp(self):
            super().setUp()
            self._spawn_processes()

        def test_leaves_early(self):
            if self.rank == 1:
                os._exit(0)
            assert self.rank == 0
    """


def test_a_rank_that_exits_0_before_its_assertions_fails(tmp_path):
    result = run(tmp_path, RANK_EXITS_0)
    assert_fails(
        result, "test_fixture.py::TestRanks::test_leaves_early", "failed", "rank 1", "never"
    )


# A teardown error after a declared call failure (torch's callback tests), declared with it.

TEARDOWN_AFTER_THE_CALL = """
    import unittest

    class TestCallbacks(unittest.TestCase):
        def tearDown(self):
            raise RuntimeError("Cannot clear callbacks while -1 are pending")

        def test_callback(self):
            raise AssertionError("the callback ran twice")
    """

CALL_ENTRY = """
    [[expect]]
    test = "test_fixture.py::TestCallbacks::test_callback"
    outcome = "fail"
    reason = "callbacks run twice on this torch"
    match = "AssertionError: the callback ran twice"
    """


@pytest.mark.parametrize("declared_teardown", [False, True], ids=["call-only", "with-teardown"])
def test_a_teardown_error_after_a_declared_fail_is_declared_with_it(tmp_path, declared_teardown):
    entry = textwrap.dedent(CALL_ENTRY)
    if declared_teardown:
        entry += 'teardown = "RuntimeError: Cannot clear callbacks"\n'
    (tmp_path / "expect.toml").write_text(entry)
    env = bazel_env(tmp_path, dict(expectations=str(tmp_path / "expect.toml")))
    result = run(tmp_path, TEARDOWN_AFTER_THE_CALL, env=env)
    case = result.record.cases["test_fixture.py::TestCallbacks::test_callback"]
    if declared_teardown:
        assert result.returncode == 0, result.output
        assert case.outcome == "declared_fail", case
        assert "then RuntimeError: Cannot clear callbacks" in case.detail
    else:
        assert result.returncode != 0, result.output
        assert case.outcome == "failed" and "then also: RuntimeError" in case.detail, case


def test_a_declared_fail_that_fails_otherwise_is_judged_not_crashed(tmp_path):
    """Another failure than the declared one: the runner names it (and does not crash)."""
    body = 'def test_declared():\n    raise KeyError("gone")\n'
    result = run(tmp_path, body, env=declared(tmp_path))
    assert_fails(result, "test_fixture.py::test_declared", "failed", "KeyError", "does not match")
    assert "Traceback" not in result.stderr.split("what the runner saw")[-1], result.output
