"""Every green proven: the ways to a PASSED that nothing earned, each through the real runner.

Each fixture below passed as a target before the inventory rule (tools/runner/session/
inventory.py, verdict.py), the witness (process/witness.py) and strict
declarations (session/expectations.py); each must fail now, naming what never ran.
"""

import textwrap

import pytest

from tools.results import junit
from tools.runner.tests.runner_subprocess import bazel_env, declare, run_runner, write_tests


def run(tmp_path, body: str, env=None, args=(), extra_files=None):
    for name, text in (extra_files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    result = run_runner(write_tests(tmp_path, body), env or bazel_env(tmp_path), args=args)
    result.output = result.stdout + result.stderr
    return result


def assert_fails(result, *needles):
    assert result.returncode != 0, result.output
    for needle in needles:
        assert needle in result.output, result.output


# 1. Bodies that never run.

GENERATOR_METHOD = """
    import unittest

    class T(unittest.TestCase):
        def test_gen(self):
            assert False, "never reached"
            yield
    """

ASYNC_BEHIND_WRAPPER = """
    import functools
    import unittest

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    class T(unittest.TestCase):
        @logged
        async def test_async(self):
            assert False, "never awaited"
    """

RETURNS_A_VALUE = """
    def test_returns():
        return 1 + 1 == 3
    """

ASSERT_IN_A_THREAD = """
    import threading

    def test_thread():
        def work():
            assert 1 == 2, "the thread's assertion"
        t = threading.Thread(target=work)
        t.start()
        t.join()
    """


@pytest.mark.parametrize(
    "body, needle",
    [
        (GENERATOR_METHOD, "returned a generator, so its body never ran"),
        (ASYNC_BEHIND_WRAPPER, "returned a coroutine, so its body never ran"),
        (RETURNS_A_VALUE, "returned bool False: assert it instead of returning it"),
        (ASSERT_IN_A_THREAD, "an exception was raised in a thread: in thread"),
    ],
    ids=["generator", "async-behind-wrapper", "returns-value", "thread-assert"],
)
@pytest.mark.parametrize("args", [[], ["-W", "ignore"], ["-p", "no:warnings"]], ids=str)
def test_a_body_that_never_ran_fails_whatever_the_warning_filters(tmp_path, body, needle, args):
    assert_fails(run(tmp_path, body, args=args), needle)


# 2. Tests the source defines that never ran.

INHERITS_TEST_FALSE = """
    class Base:
        __test__ = False

    class TestInherits(Base):
        def test_hidden(self):
            assert False

    def test_ok():
        pass
    """

INIT_CLASS = """
    class TestWithInit:
        def __init__(self):
            pass

        def test_never(self):
            assert False

    def test_ok():
        pass
    """

CONFTEST_DROPS = """
    def pytest_collection_modifyitems(items):
        items[:] = [i for i in items if "quarantined" not in i.name]
    """

LOAD_TESTS_ADDS = """
    import unittest

    def check_only_unittest_runs():
        assert False

    def load_tests(loader, tests, pattern):
        tests.addTest(unittest.FunctionTestCase(check_only_unittest_runs))
        return tests

    def test_ok():
        pass
    """


def test_a_plain_class_inheriting_test_false_fails(tmp_path):
    assert_fails(
        run(tmp_path, INHERITS_TEST_FALSE),
        "defined but never collected by pytest: test_fixture.py::TestInherits::test_hidden",
    )


@pytest.mark.parametrize(
    "args, env",
    [
        ([], {}),
        (["-W", "ignore"], {}),
        (["-p", "no:warnings"], {}),
        (["-W", "ignore::pytest.PytestCollectionWarning"], {}),
        ([], {"PYTHONWARNINGS": "ignore"}),
    ],
    ids=["plain", "W-ignore", "no-warnings", "W-collection", "PYTHONWARNINGS"],
)
def test_a_class_with_init_fails_whatever_the_warning_filters(tmp_path, args, env):
    result = run(tmp_path, INIT_CLASS, bazel_env(tmp_path, **env), args=args)
    assert_fails(result, "test_fixture.py::TestWithInit::test_never")


def test_a_conftest_that_drops_items_fails_naming_them(tmp_path):
    body = "def test_quarantined():\n    assert False\n\ndef test_ok():\n    pass\n"
    result = run(tmp_path, body, extra_files={"conftest.py": CONFTEST_DROPS})
    assert_fails(result, "defined but never ran: test_fixture.py::test_quarantined")


def test_what_only_unittests_loader_runs_fails(tmp_path):
    assert_fails(run(tmp_path, LOAD_TESTS_ADDS), "check_only_unittest_runs")


def test_the_users_own_filter_is_not_never_ran(tmp_path):
    body = "def test_a():\n    pass\n\ndef test_b():\n    pass\n"
    result = run(tmp_path, body, bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="test_a"))
    assert result.returncode == 0, result.output
    result = run(tmp_path, body, args=["-k", "test_b"])
    assert result.returncode == 0, result.output


def test_ini_options_cannot_rename_tests_away(tmp_path):
    body = "def test_a():\n    pass\n\ndef check_b():\n    pass\n"
    ini = "[pytest]\npython_functions = check_*\n"
    assert_fails(
        run(tmp_path, body, extra_files={"pytest.ini": ini}),
        "defined but never ran: test_fixture.py::test_a",
    )


# 3. Declarations that say what they accept.

ONE_FAILS = """
    def test_known_bug():
        assert 1 == 2, "off by one"

    def test_other():
        pass
    """


@pytest.mark.parametrize(
    "entry, needle",
    [
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n',
            "match is required",
        ),
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n'
            'match = ""\n',
            "a fail's match is literal text `Type: message-prefix`",
        ),
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n'
            'match = ".*"\n',
            "a fail's match is literal text `Type: message-prefix`",
        ),
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n'
            'match = "off by one"\n',
            "a fail's match is literal text `Type: message-prefix`",
        ),
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n'
            'match = "AssertionError: .*"\n',
            "its message prefix holds fewer than 8 characters",
        ),
        (
            'test = "test_fixture.py::test_known_bug"\noutcome = "skip"\nreason = "bug 123"\n'
            'match = "."\n',
            "holds fewer than 8 characters",
        ),
        (
            'test = "test_fixture.py::*"\noutcome = "fail"\nreason = "bug 123"\n'
            'match = "AssertionError: off by one"\n',
            "add count = N",
        ),
    ],
    ids=[
        "no-match",
        "empty",
        "match-all",
        "no-type",
        "short-message",
        "short-skip",
        "pattern-no-count",
    ],
)
def test_a_declaration_that_accepts_anything_is_refused(tmp_path, entry, needle):
    assert_fails(run(tmp_path, ONE_FAILS, declare(tmp_path, entry)), needle)


def test_a_declared_fail_accepts_only_its_exception(tmp_path):
    entry = (
        'test = "test_fixture.py::test_known_bug"\noutcome = "fail"\nreason = "bug 123"\n'
        'match = "AssertionError: off by one"\n'
    )
    result = run(tmp_path, ONE_FAILS, declare(tmp_path, entry))
    assert result.returncode == 0, result.output
    assert "matched 'AssertionError: off by one'" in result.output
    case = {c.name: c.case for c in junit.cases(tmp_path / "test.xml")}["test_known_bug"]
    assert case.declaration == "fail: bug 123"
    # The same test now dying of an ImportError is not the declared failure.
    body = ONE_FAILS.replace('assert 1 == 2, "off by one"', "import no_such_module_anywhere")
    assert_fails(run(tmp_path, body, declare(tmp_path, entry)), "does not match")


def test_a_pattern_that_comes_to_cover_another_test_is_stale(tmp_path):
    body = ONE_FAILS + "\n    def test_known_bug_too():\n        assert 1 == 2, 'off by one'\n"
    entry = (
        'test = "test_fixture.py::test_known_bug*"\noutcome = "fail"\nreason = "bug 123"\n'
        'match = "AssertionError: off by one"\ncount = 1\n'
    )
    assert_fails(run(tmp_path, body, declare(tmp_path, entry)), "matches 2 tests, its count says 1")


def test_a_declared_skip_for_another_reason_fails(tmp_path):
    body = (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_s(self):\n"
        "        self.skipTest('flaky on this filesystem')\n"
    )
    entry = (
        'test = "test_fixture.py::T::test_s"\noutcome = "skip"\nreason = "needs cuda"\n'
        'match = "requires cuda"\n'
    )
    assert_fails(run(tmp_path, body, declare(tmp_path, entry)), "does not match")


def test_a_users_not_applicable_marker_is_an_undeclared_skip(tmp_path):
    body = """
        import pytest

        @pytest.mark.torch_test_not_applicable("flaky on shared runners")
        def test_flaky():
            pytest.skip("flaky on shared runners")
        """
    assert_fails(run(tmp_path, body), "skipped tests fail this target")
