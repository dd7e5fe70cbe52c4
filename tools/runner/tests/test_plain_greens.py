"""What plain pytest passes, a target passes: valid shapes the runner once failed with a false
message, each through the real runner, and the removals beside them that must stay red.

- Cases a conftest generates (pytest_generate_tests, a fixture's params) are the source's:
  the inventory collects with the conftest (tools/runner/session/inventory.py), from the
  items as pytest's collection makes them. What a conftest takes away after that, or keeps
  from being collected at all, still fails the target.
- An async def awaited by a conftest's runner ran its body (tools/runner/process/witness.py
  witnesses it where it is awaited); one never awaited did not.
- A test that runs an inner unittest suite and asserts its failure passed: the inner cases'
  failures (and subtests) are the inner suite's, not the test's, whether its body, a fixture
  or setUp ran it.
- Shards partition the generated cases, and the stability check (tools/runner/collection.py)
  compares theirs too.
"""

import subprocess
import sys
import textwrap

import pytest

from tools.results import record
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests


def run(tmp_path, body: str, conftest: str | None = None, others=None):
    """The runner on `body` (and on `others`, {name: text}, as more sources of the target)."""
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    more = [str(write_tests(tmp_path, text, name)) for name, text in (others or {}).items()]
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path), args=more)
    result.output = result.stdout + result.stderr
    result.record = record.read(tmp_path / "test.xml")
    return result


def plain_pytest(tmp_path) -> subprocess.CompletedProcess:
    """pytest alone on the fixture (its conftest beside it), none of the runner's plugins."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_fixture.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


# Valid: plain pytest passes each; so must the target.

GENERATES = """
    import pytest

    def pytest_generate_tests(metafunc):
        if "size" in metafunc.fixturenames:
            metafunc.parametrize("size", [1, 3])

    @pytest.fixture(params=["cpu", "meta"])
    def device(request):
        return request.param
    """

USES_GENERATED = """
    def test_sizes(size):
        assert size % 2 == 1

    def test_devices(device):
        assert device in ("cpu", "meta")
    """

AWAITS = """
    import asyncio
    import inspect

    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        if not inspect.iscoroutinefunction(pyfuncitem.obj):
            return None
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
        return True
    """

ASYNC_TEST = """
    import asyncio

    async def test_sleeps(tmp_path):
        await asyncio.sleep(0)
        assert tmp_path.exists()
    """

RUNS_AN_INNER_SUITE = """
    import io
    import unittest

    class Inner(unittest.TestCase):
        __test__ = False  # run by the tests below, not collected

        def test_fails(self):
            self.fail("the inner case's own failure")

    def inner_result():
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Inner)
        return unittest.TextTestRunner(stream=io.StringIO()).run(suite)

    class TestRunner(unittest.TestCase):
        def test_reports_the_inner_failure(self):
            self.assertEqual(len(inner_result().failures), 1)

    def test_a_function_reports_it_too():
        assert not inner_result().wasSuccessful()
    """

# The inner suite run before the outer body: in a fixture, in setUp; its subtests are its own.
RUNS_AN_INNER_SUITE_FIRST = """
    import io
    import unittest

    import pytest

    class Inner(unittest.TestCase):
        __test__ = False

        def test_fails(self):
            self.fail("the inner case's own failure")

        def test_a_subtest_fails(self):
            with self.subTest(i=1):
                self.fail("the inner subtest's own failure")

    def inner_result():
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Inner)
        return unittest.TextTestRunner(stream=io.StringIO()).run(suite)

    @pytest.fixture
    def inner():
        return inner_result()

    def test_a_fixture_ran_it(inner):
        assert len(inner.failures) == 2

    class TestSetUpRunsIt(unittest.TestCase):
        def setUp(self):
            self.inner = inner_result()

        def test_reads_it(self):
            self.assertEqual(len(self.inner.failures), 2)
    """


# pytest's own session run inside a test (pytester's in-process run, a test of a plugin): its
# cases are the test's to judge, as an inner unittest suite's are.
RUNS_AN_INNER_SESSION = """
    import pytest

    def test_the_inner_session_fails(tmp_path):
        inner = tmp_path / "test_inner.py"
        inner.write_text("def test_fails():\\n    assert False, 'the inner case'\\n")
        ran = pytest.main([str(inner), "-q", "-p", "no:cacheprovider"])
        assert ran == pytest.ExitCode.TESTS_FAILED
    """


# A TestCase made by a function and bound to a name of its own (upstream's
# create_local_tensor_test_class): pytest names its cases by that name, not the class's.
BINDS_A_MADE_CLASS = """
    import unittest

    class TestA(unittest.TestCase):
        def test_one(self):
            pass

    def with_local_tensor(cls):
        return type(cls.__name__ + "WithLocalTensor", (cls,), {})

    instantiate_device_type_tests = with_local_tensor(TestA)
    """


@pytest.mark.parametrize(
    "conftest, body, cases",
    [
        (
            GENERATES,
            USES_GENERATED,
            [
                "test_fixture.py::test_sizes[1]",
                "test_fixture.py::test_sizes[3]",
                "test_fixture.py::test_devices[cpu]",
                "test_fixture.py::test_devices[meta]",
            ],
        ),
        (AWAITS, ASYNC_TEST, ["test_fixture.py::test_sleeps"]),
        (
            None,
            RUNS_AN_INNER_SUITE,
            [
                "test_fixture.py::TestRunner::test_reports_the_inner_failure",
                "test_fixture.py::test_a_function_reports_it_too",
            ],
        ),
        (
            None,
            RUNS_AN_INNER_SUITE_FIRST,
            [
                "test_fixture.py::test_a_fixture_ran_it",
                "test_fixture.py::TestSetUpRunsIt::test_reads_it",
            ],
        ),
        (None, RUNS_AN_INNER_SESSION, ["test_fixture.py::test_the_inner_session_fails"]),
        (
            None,
            BINDS_A_MADE_CLASS,
            [
                "test_fixture.py::TestA::test_one",
                "test_fixture.py::instantiate_device_type_tests::test_one",
            ],
        ),
    ],
    ids=[
        "conftest-generates-cases",
        "conftest-awaits-async-def",
        "inner-unittest-suite",
        "inner-unittest-suite-before-the-body",
        "inner-pytest-session",
        "a-made-class-bound-to-its-own-name",
    ],
)
def test_what_plain_pytest_passes_the_target_passes(tmp_path, conftest, body, cases):
    result = run(tmp_path, body, conftest)
    assert result.returncode == 0, result.output
    assert {c: result.record.cases[c].outcome for c in cases} == dict.fromkeys(cases, "passed")
    assert sorted(result.record.cases) == sorted(cases), result.output
    plain = plain_pytest(tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr


# Red: what a conftest removes, or keeps from being collected, or never awaits.

GENERATES_THEN_DROPS = (
    GENERATES
    + """
    def pytest_collection_modifyitems(items):
        items[:] = [i for i in items if i.name != "test_sizes[3]"]
    """
)

# A hook wrapper of its own, ahead of everyone's modifyitems: still after the collection.
DROPS_FIRST = (
    GENERATES
    + """
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(items):
        items[:] = [i for i in items if i.name != "test_sizes[3]"]
        return (yield)
    """
)

# Marks a failing test as expected to fail: a conftest's marker is no expectation of the source.
MARKS_XFAIL = """
    import pytest

    def pytest_itemcollected(item):
        item.add_marker(pytest.mark.xfail(reason="known"))

    def pytest_collection_modifyitems(items):
        for item in items:
            item.add_marker(pytest.mark.xfail(reason="known"))
    """

FAILS = """
    def test_fails():
        assert 1 == 2, "the real failure"
    """

# The file's module never made: a collector of its own stands in with a case that passes.
REPLACES_THE_MODULE = """
    import pytest

    class StandIn(pytest.Item):
        def runtest(self):
            pass

    class NotTheModule(pytest.File):
        def collect(self):
            yield StandIn.from_parent(self, name="stand_in")

    def pytest_pycollect_makemodule(module_path, parent):
        if module_path.name == "test_replaced.py":
            return NotTheModule.from_parent(parent, path=module_path)
    """

REPLACED = """
    def test_hidden():
        assert 1 == 2, "never collected"
    """

# One test function replaced by an item of its own that passes.
REPLACES_A_FUNCTION = """
    import pytest

    class StandIn(pytest.Item):
        def runtest(self):
            pass

    def pytest_pycollect_makeitem(collector, name, obj):
        if name == "test_fails":
            return StandIn.from_parent(collector, name=name)
    """

DROPS_THE_COROUTINE = """
    import inspect

    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        if inspect.iscoroutinefunction(pyfuncitem.obj):
            pyfuncitem.obj()  # created, never awaited
            return True
    """

ASYNC_FAILS = """
    async def test_async():
        raise AssertionError("its body never ran")
    """

INNER_SUITE_FAILS_THE_TEST = """
    import io
    import unittest

    class Inner(unittest.TestCase):
        __test__ = False

        def test_fails(self):
            self.fail("the inner case's own failure")

    class TestRunner(unittest.TestCase):
        def test_expects_success(self):
            suite = unittest.defaultTestLoader.loadTestsFromTestCase(Inner)
            result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
            self.assertTrue(result.wasSuccessful(), "the outer case's own assertion")
    """


INNER_SESSION_FAILS_THE_TEST = RUNS_AN_INNER_SESSION.replace(
    "== pytest.ExitCode.TESTS_FAILED", '== pytest.ExitCode.OK, "the outer case\'s own assertion"'
)


@pytest.mark.parametrize(
    "conftest, body, others, case, outcome, needle",
    [
        (GENERATES_THEN_DROPS, USES_GENERATED, None, "test_sizes[3]", "never_ran", ""),
        (DROPS_FIRST, USES_GENERATED, None, "test_sizes[3]", "never_ran", ""),
        (MARKS_XFAIL, FAILS, None, "test_fails", "failed", "the real failure"),
        (REPLACES_A_FUNCTION, FAILS, None, None, None, "test_fixture.py::test_fails (function)"),
        (
            REPLACES_THE_MODULE,
            "def test_ok():\n    pass\n",
            {"test_replaced.py": REPLACED},
            None,
            None,
            "test_replaced.py::test_hidden (function)",
        ),
        (DROPS_THE_COROUTINE, ASYNC_FAILS, None, "test_async", "failed", "nobody awaited"),
        (
            None,
            INNER_SUITE_FAILS_THE_TEST,
            None,
            "TestRunner::test_expects_success",
            "failed",
            "the outer case's own assertion",
        ),
        (
            None,
            INNER_SESSION_FAILS_THE_TEST,
            None,
            "test_the_inner_session_fails",
            "failed",
            "the outer case's own assertion",
        ),
    ],
    ids=[
        "modifyitems-drops-a-generated-case",
        "first-wrapper-drops-a-generated-case",
        "conftest-marks-xfail",
        "makeitem-replaces-a-function",
        "makemodule-replaces-a-file",
        "coroutine-never-awaited",
        "outer-case-fails-on-its-own",
        "outer-case-fails-after-an-inner-session",
    ],
)
def test_what_a_conftest_takes_away_stays_red(
    tmp_path, conftest, body, others, case, outcome, needle
):
    result = run(tmp_path, body, conftest, others)
    assert result.returncode != 0, result.output
    assert result.record is not None and result.record.verdict == record.FAILED, result.output
    if case is None:  # a definition with no case: fails every target of the source
        assert any(needle in line for line in result.record.never_collected), result.output
        return
    got = result.record.cases.get(f"test_fixture.py::{case}")
    assert got is not None and got.outcome == outcome, (got, result.output)
    assert needle in got.detail, (got, result.output)


# Sharded: the inventory is a process of its own, with another hash seed (collection.py).

# Positional ids (`pair0`, ...) over a set: which pair each names follows the hash seed.
GENERATES_BY_SEED = """
    def pytest_generate_tests(metafunc):
        if "pair" in metafunc.fixturenames:
            metafunc.parametrize("pair", list({(name, 1) for name in "abcdefgh"}))
    """


def test_shards_partition_the_generated_cases(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(GENERATES))
    ran = []
    for index in (0, 1):
        env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=index)
        result = run_runner(write_tests(tmp_path, USES_GENERATED), env)
        assert result.returncode == 0, result.stdout + result.stderr
        ran += list(record.read(tmp_path / "test.xml").cases)
    assert sorted(ran) == sorted(
        f"test_fixture.py::{case}"
        for case in ("test_sizes[1]", "test_sizes[3]", "test_devices[cpu]", "test_devices[meta]")
    )


def test_generated_ids_that_follow_the_hash_seed_fail_the_shard(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(GENERATES_BY_SEED))
    env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=0)
    result = run_runner(write_tests(tmp_path, "def test_pair(pair):\n    pass\n"), env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    problems = record.read(tmp_path / "test.xml").problems
    assert any("collection differs between two processes" in p for p in problems), output


# A source that is no Python module: a file of a conftest's own kind, or a node id given on the
# command line (`bazel run ... -- test_fixture.py::test_a`). The inventory imported each as a
# test module and failed the target ("a source file pytest made no module of").

COLLECTS_CHECK_FILES = """
    import pytest

    class Line(pytest.Item):
        def runtest(self):
            assert eval(self.name.partition(": ")[2])

    class Checks(pytest.File):
        def collect(self):
            for n, text in enumerate(self.path.read_text().splitlines()):
                yield Line.from_parent(self, name=f"{n}: {text}")

    def pytest_collect_file(parent, file_path):
        if file_path.suffix == ".check":
            return Checks.from_parent(parent, path=file_path)
    """


@pytest.mark.parametrize(
    "conftest, files, args, cases",
    [
        (
            COLLECTS_CHECK_FILES,
            {"sums.check": "1 + 1 == 2\n3 > 2\n"},
            ["sums.check"],
            ["sums.check::0: 1 + 1 == 2", "sums.check::1: 3 > 2", "test_fixture.py::test_a"],
        ),
        (None, {}, ["test_fixture.py::test_a"], ["test_fixture.py::test_a"]),
    ],
    ids=["a-conftests-own-file-kind", "a-node-id-argument"],
)
def test_a_source_that_is_no_python_module_is_not_imported(tmp_path, conftest, files, args, cases):
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = run_runner(
        write_tests(tmp_path, "def test_a():\n    pass\n"), bazel_env(tmp_path), args=args
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    rec = record.read(tmp_path / "test.xml")
    assert {c: o.outcome for c, o in rec.cases.items()} == dict.fromkeys(cases, "passed"), output


# A source given after an option (`args = ["-v", "test_other.py"]`): pytest collects it, the
# inventory reads only the sources before the first option, so a conftest that drops its
# failing case left the target green. Refused in one line instead.

DROPS_THE_OTHER_FILE = """
    def pytest_collection_modifyitems(items):
        items[:] = [i for i in items if "test_other" not in i.nodeid]
    """


@pytest.mark.parametrize(
    "args", [["-v", "test_other.py"], ["--durations", "3", "test_other.py::test_fails"]]
)
def test_a_source_after_an_option_is_refused(tmp_path, args):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(DROPS_THE_OTHER_FILE))
    (tmp_path / "test_other.py").write_text("def test_fails():\n    assert False\n")
    result = run_runner(
        write_tests(tmp_path, "def test_a():\n    pass\n"), bazel_env(tmp_path), args=args
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "given after an option" in output, output
    # Before the options it is a source like the first: its case is judged, and fails.
    before = run_runner(
        write_tests(tmp_path, "def test_a():\n    pass\n"),
        bazel_env(tmp_path),
        args=["test_other.py", "-v"],
    )
    assert before.returncode != 0 and "test_other.py::test_fails" in before.stdout + before.stderr
