"""The runner knows what pytest knows: each subtest and each doctest is a case of the record.

A unittest `self.subTest(...)` and pytest's `subtests` fixture catch what their block raises and
make reports of their own; the test method returns. A doctest is an item of pytest's doctest
plugin, no function. Each shape below ran green in the record before the runner saw them
(the target was red only through pytest's exit status, which a conftest can reset), and the
gate, which reads the record, compared none of them.
"""

import pytest

from tools.results import record
from tools.runner.tests.runner_subprocess import declare
from tools.runner.tests.runner_subprocess import run_fixture as run

EXIT_STATUS_REWRITTEN = """
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        session.exitstatus = 0
    """

UNITTEST_SUBTESTS = """
    import unittest

    class T(unittest.TestCase):
        def test_squares(self):
            for i in range(3):
                with self.subTest(i=i):
                    self.assertEqual(i * i, i, "only 0 and 1 are their own squares")

        def test_all_pass(self):
            for name in ("a", "b"):
                with self.subTest("named", name=name):
                    self.assertTrue(name)
    """

SUBTESTS_FIXTURE = """
    def test_evens(subtests):
        for i in range(3):
            with subtests.test("even", i=i):
                assert i % 2 == 0, f"{i} is odd"
    """

DOCTESTS = """
    def double(x):
        '''
        >>> double(2)
        4
        '''
        return 2 * x


    def half(x):
        '''
        >>> half(4)
        3
        '''
        return x // 2


    def test_double():
        assert double(3) == 6
    """


def _case(result, name):
    got = result.record.cases.get(name)
    assert got is not None, (sorted(result.record.cases), result.output)
    return got


@pytest.mark.parametrize("args", [(), ("-p", "no:subtests")], ids=["default", "no-subtests"])
def test_a_failing_unittest_subtest_fails_its_case_and_is_a_case_of_its_own(tmp_path, args):
    result = run(tmp_path, UNITTEST_SUBTESTS, {"conftest.py": EXIT_STATUS_REWRITTEN}, args=args)
    assert result.returncode != 0, result.output
    assert result.record.verdict == record.FAILED
    case = _case(result, "test_fixture.py::T::test_squares")
    assert case.outcome == "failed", case
    assert "subtest (i=2) failed: AssertionError: 4 != 2" in case.detail, case
    outcomes = {
        i: _case(result, f"test_fixture.py::T::test_squares (i={i})").outcome for i in range(3)
    }
    assert outcomes == {0: "passed", 1: "passed", 2: "failed"}
    assert _case(result, "test_fixture.py::T::test_all_pass").outcome == "passed"
    for name in ("a", "b"):
        sub = _case(result, f"test_fixture.py::T::test_all_pass [named] (name={name})")
        assert sub.outcome == "passed", sub


def test_a_failing_subtest_of_the_fixture_fails_its_case(tmp_path):
    result = run(tmp_path, SUBTESTS_FIXTURE, {"conftest.py": EXIT_STATUS_REWRITTEN})
    assert result.returncode != 0, result.output
    case = _case(result, "test_fixture.py::test_evens")
    assert case.outcome == "failed", case
    assert "subtest [even] (i=1) failed: AssertionError: 1 is odd" in case.detail, case
    subs = {i: _case(result, f"test_fixture.py::test_evens [even] (i={i})") for i in range(3)}
    assert [subs[i].outcome for i in range(3)] == ["passed", "failed", "passed"]


def test_subtests_that_all_pass_leave_the_target_green(tmp_path):
    body = UNITTEST_SUBTESTS.replace("self.assertEqual(i * i, i,", "self.assertLessEqual(i, i * i,")
    result = run(tmp_path, body)
    assert result.returncode == 0, result.output
    assert {c.outcome for c in result.record.cases.values()} == {"passed"}
    assert len(result.record.cases) == 2 + 3 + 2  # two cases, five subtests


def test_doctests_are_inventoried_and_witnessed_cases(tmp_path):
    result = run(
        tmp_path, DOCTESTS, {"conftest.py": EXIT_STATUS_REWRITTEN}, args=["--doctest-modules"]
    )
    assert result.returncode != 0, result.output
    assert _case(result, "test_fixture.py::test_fixture.double").outcome == "passed"
    half = _case(result, "test_fixture.py::test_fixture.half")
    assert half.outcome == "failed", half
    assert "half(4)" in half.detail and "expected '3', got '2'" in half.detail, half
    assert _case(result, "test_fixture.py::test_double").outcome == "passed"


def test_a_doctest_a_conftest_deselects_still_fails_as_never_run(tmp_path):
    deselects_doctests = """
        def pytest_collection_modifyitems(config, items):
            items[:] = [i for i in items if "half" not in i.nodeid]
        """
    result = run(
        tmp_path, DOCTESTS, {"conftest.py": deselects_doctests}, args=["--doctest-modules"]
    )
    assert result.returncode != 0, result.output
    assert _case(result, "test_fixture.py::test_fixture.half").outcome == "never_ran"


EXPECTED_SUBTEST_FAILURE = """
    import unittest

    class T(unittest.TestCase):
        @unittest.expectedFailure
        def test_known_bad(self):
            for i in range(2):
                with self.subTest(i=i):
                    self.assertEqual(i, 0, "only zero is zero")
    """


def test_an_expected_failure_inside_a_subtest_is_the_case_xfail(tmp_path):
    result = run(tmp_path, EXPECTED_SUBTEST_FAILURE)
    assert result.returncode == 0, result.output
    assert _case(result, "test_fixture.py::T::test_known_bad").outcome == "xfail"
    assert _case(result, "test_fixture.py::T::test_known_bad (i=1)").outcome == "xfail"
    assert _case(result, "test_fixture.py::T::test_known_bad (i=0)").outcome == "passed"


def test_a_declared_fail_covers_every_failing_subtest_it_matches_and_no_other(tmp_path):
    entry = """
        test = "test_fixture.py::T::test_squares"
        outcome = "fail"
        reason = "squares above 1 differ: measured on this torch"
        match = "AssertionError: 4 != 2 : only 0 and 1"
        """
    result = run(tmp_path, UNITTEST_SUBTESTS, env=declare(tmp_path, entry))
    assert result.returncode == 0, result.output
    assert _case(result, "test_fixture.py::T::test_squares").outcome == "declared_fail"
    assert _case(result, "test_fixture.py::T::test_squares (i=2)").outcome == "declared_fail"
    # A second failing subtest the entry does not match is a failure of its own.
    body = UNITTEST_SUBTESTS.replace("range(3)", "range(4)")
    result = run(tmp_path, body, env=declare(tmp_path, entry))
    assert result.returncode != 0, result.output
    case = _case(result, "test_fixture.py::T::test_squares")
    assert case.outcome == "failed" and "9 != 3" in case.detail, case
    assert _case(result, "test_fixture.py::T::test_squares (i=3)").outcome == "failed"


KEPT_COROUTINE = """
    import functools

    made = []

    def recorded(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            made.append(fn(*args, **kwargs))  # kept: CPython never warns of it

        return call

    @recorded
    async def test_checks_nothing():
        assert False, "never runs"

    def test_plain():
        pass
    """


def test_a_coroutine_a_wrapper_keeps_unawaited_fails_its_case(tmp_path):
    result = run(tmp_path, KEPT_COROUTINE)
    assert result.returncode != 0, result.output
    case = _case(result, "test_fixture.py::test_checks_nothing")
    assert case.outcome == "failed", case
    assert "coroutine nobody awaited" in case.detail and "kept and never awaited" in case.detail
    assert _case(result, "test_fixture.py::test_plain").outcome == "passed"


# A target already red for a known failure; its subtest i=2 regresses where BOUND drops to 1.
GATED = """
    import unittest

    class T(unittest.TestCase):
        def test_known_bad(self):
            self.fail("a known failure, on both sides")

        def test_bounded(self):
            for i in range(3):
                with self.subTest(i=i):
                    self.assertLessEqual(i, BOUND, "beyond the bound")
    """


def test_a_subtest_regression_in_a_red_target_fails_the_gate(tmp_path):
    from tools.gate import compare, gate
    from tools.results import bep

    snapshots = []
    for side, bound in (("baseline", 2), ("candidate", 1)):
        where = tmp_path / side
        where.mkdir()
        result = run(where, GATED.replace("BOUND", str(bound)))
        assert result.returncode != 0, result.output  # red on both sides: the known failure
        (where / "test.log").write_text(result.output)
        outputs = {"test.xml": where / "test.xml", "test.log": where / "test.log"}
        target = bep.Target("//p:t", status="FAILED", shard_count=1)
        target.attempts.append(bep.Attempt(1, 1, 1, "FAILED", False, 1.0, outputs))
        snapshots.append(compare.snapshot({"//p:t": target}))
    result = compare.compare(*snapshots)
    regressed = sorted(r["case"] for r in result["regressions"])
    assert regressed == [
        "test_fixture.T::test_bounded",
        "test_fixture.T::test_bounded (i=2)",
    ], result["regressions"]
    assert gate.exit_code(result) == gate.EXIT_REGRESSION


# A conftest's own kind of item, made of functions named check_*: cases of the source.
PLUGIN_ITEMS = """
    import pytest

    class Check(pytest.Item):
        def __init__(self, *, fn, **kwargs):
            super().__init__(**kwargs)
            self.fn = fn

        def runtest(self):
            self.fn()

    def pytest_pycollect_makeitem(collector, name, obj):
        if name.startswith("check_"):
            return Check.from_parent(collector, name=name, fn=obj)
    """

CHECKS = """
    def check_holds():
        assert 1 + 1 == 2

    def check_breaks():
        assert 1 + 1 == 3, "arithmetic"
    """


def test_an_item_a_plugin_collects_is_an_inventoried_witnessed_case(tmp_path):
    conftest = PLUGIN_ITEMS + EXIT_STATUS_REWRITTEN.replace("    import pytest\n", "")
    result = run(tmp_path, CHECKS, {"conftest.py": conftest})
    assert result.returncode != 0, result.output
    assert _case(result, "test_fixture.py::check_holds").outcome == "passed"
    broke = _case(result, "test_fixture.py::check_breaks")
    assert broke.outcome == "failed" and "arithmetic" in broke.detail, broke
    # The session that never runs it leaves it never run: the inventory holds it.
    skips_them = (
        conftest + "\n    def pytest_collection_modifyitems(items):\n        items[:] = []\n"
    )
    result = run(tmp_path, CHECKS, {"conftest.py": skips_them})
    assert result.returncode != 0, result.output
    assert _case(result, "test_fixture.py::check_breaks").outcome == "never_ran"


def test_a_packed_file_that_cannot_be_imported_fails_apart(tmp_path):
    from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

    healthy = write_tests(tmp_path, "def test_a():\n    pass\n", "test_healthy.py")
    broken = write_tests(tmp_path, "import no_such_module_here\n", "test_broken.py")
    skips = write_tests(
        tmp_path, "import pytest\npytest.importorskip('no_such_either')\n", "test_skips.py"
    )
    result = run_runner(healthy, bazel_env(tmp_path), args=[str(broken), str(skips)])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    rec = record.read(tmp_path / "test.xml")
    assert rec is not None, output
    assert rec.cases["test_healthy.py::test_a"].outcome == "passed", output  # still ran
    import_failed = rec.cases["test_broken.py"]
    assert import_failed.outcome == "failed", import_failed
    assert "No module named 'no_such_module_here'" in import_failed.detail, import_failed
    skipped = rec.cases["test_skips.py"]
    assert skipped.outcome == "skipped" and "no_such_either" in skipped.detail, skipped


def test_the_sessions_end_scan_passes_over_dead_weak_proxies(tmp_path):
    # A weakref.proxy whose referent is gone raises ReferenceError on isinstance(): the scan
    # for kept coroutines must look at such objects only by their type.
    body = """
        import weakref

        class Thing:
            pass

        def _dead_proxy():
            thing = Thing()
            return weakref.proxy(thing)

        kept = [_dead_proxy()]

        def test_passes():
            assert kept
        """
    result = run(tmp_path, body)
    assert result.returncode == 0, result.output
    assert _case(result, "test_fixture.py::test_passes").outcome == "passed"


def test_a_text_files_doctest_a_conftest_deselects_fails_as_never_run(tmp_path):
    # `--doctest-glob` on a data file among the sources: the inventory holds its doctest (it
    # once imported the .txt as a module, an INTERNALERROR).
    drops_text_doctests = """
        def pytest_collection_modifyitems(items):
            items[:] = [i for i in items if "notes.txt" not in i.nodeid]
        """
    files = {"notes.txt": ">>> 2 * 3\n6\n", "conftest.py": drops_text_doctests}
    result = run(
        tmp_path, "def test_a():\n    pass\n", files, args=["notes.txt", "--doctest-glob=*.txt"]
    )
    assert result.returncode != 0, result.output
    assert "INTERNALERROR" not in result.output, result.output
    assert _case(result, "notes.txt::notes.txt").outcome == "never_ran"
    assert _case(result, "test_fixture.py::test_a").outcome == "passed"


def test_a_subtest_around_a_failing_nested_one_is_not_recorded_passed(tmp_path):
    # unittest reports no success for the outer block (its nested subtest failed), nor must the
    # record: the outer subtest `(a=1)` did not pass.
    body = """
        import unittest

        class T(unittest.TestCase):
            def test_nested(self):
                with self.subTest(a=1):
                    with self.subTest(b=2):
                        self.assertEqual(1, 2, "the inner block")
        """
    result = run(tmp_path, body)
    assert result.returncode != 0, result.output
    assert _case(result, "test_fixture.py::T::test_nested (b=2, a=1)").outcome == "failed"
    assert "test_fixture.py::T::test_nested (a=1)" not in result.record.cases, result.output
