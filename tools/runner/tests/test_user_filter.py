"""Only the user's own filter excuses a case that did not run (tools/runner/session/user_filter.py),
through the real runner.

The user's filter is what the target's `args`, the command line of `bazel run ... --`, Bazel's
--test_filter and TORCH_TEST_NODE_IDS say, with `-m` read against the markers the source
declares. A filter a conftest or an ini file sets, or a marker a conftest adds, still deselects
the case in pytest, but the runner then judges it as never run. And `-o addopts` is refused: it
replaces the ini file's addopts, a door to switching the runner's plugins off.
"""

import textwrap

import pytest

from tools.results import record
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests


def run(tmp_path, body: str, files=None, args=(), env=None):
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    result = run_runner(write_tests(tmp_path, body), env or bazel_env(tmp_path), args=args)
    result.output = result.stdout + result.stderr
    result.record = record.read(tmp_path / "test.xml")
    return result


def outcomes(result) -> dict[str, str]:
    assert result.record is not None, result.output
    return {case: c.outcome for case, c in result.record.cases.items()}


# One slow test beside a quick one: what every filter below leaves out is test_slow.
SLOW_AND_QUICK = """
    import pytest

    @pytest.mark.slow
    def test_slow():
        pass

    def test_quick():
        pass
    """

REGISTERS_MARKERS = """
    def pytest_configure(config):
        config.addinivalue_line("markers", "slow: takes long")
        config.addinivalue_line("markers", "suite: the module's")
    """

# 1. Filters that are not the user's: pytest deselects test_slow, the runner does not excuse it.

CONFTEST_DEFAULTS_MARKEXPR = """
    def pytest_configure(config):
        config.addinivalue_line("markers", "slow: takes long")
        if not config.option.markexpr:
            config.option.markexpr = "not slow"
    """

CONFTEST_SETS_KEYWORD = """
    def pytest_configure(config):
        config.addinivalue_line("markers", "slow: takes long")
        config.option.keyword = "not test_slow"
    """

INI_ADDOPTS_MARKEXPR = """
    [pytest]
    markers = slow: takes long
    addopts = -m "not slow"
    """

UNMARKED_PAIR = """
    def test_slow():
        pass

    def test_quick():
        pass
    """

# A conftest that marks a test the source never marked (`heavy`, which no test's name holds);
# the target's own -m or -k then excludes the marker.
CONFTEST_MARKS_AT_ITEMCOLLECTED = """
    import pytest

    def pytest_configure(config):
        config.addinivalue_line("markers", "heavy: a conftest's")

    def pytest_itemcollected(item):
        if item.name == "test_slow":
            item.add_marker(pytest.mark.heavy)
    """

CONFTEST_MARKS_AT_MODIFYITEMS = """
    import pytest

    def pytest_configure(config):
        config.addinivalue_line("markers", "heavy: a conftest's")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(items):
        for item in items:
            if item.name == "test_slow":
                item.add_marker(pytest.mark.heavy)
    """


@pytest.mark.parametrize(
    "body, files, args",
    [
        (SLOW_AND_QUICK, {"conftest.py": CONFTEST_DEFAULTS_MARKEXPR}, ()),
        (SLOW_AND_QUICK, {"conftest.py": CONFTEST_SETS_KEYWORD}, ()),
        (SLOW_AND_QUICK, {"pytest.ini": INI_ADDOPTS_MARKEXPR}, ()),
        (UNMARKED_PAIR, {"conftest.py": CONFTEST_MARKS_AT_ITEMCOLLECTED}, ("-m", "not heavy")),
        (UNMARKED_PAIR, {"conftest.py": CONFTEST_MARKS_AT_MODIFYITEMS}, ("-m", "not heavy")),
        (UNMARKED_PAIR, {"conftest.py": CONFTEST_MARKS_AT_ITEMCOLLECTED}, ("-k", "not heavy")),
    ],
    ids=[
        "conftest-markexpr-default",
        "conftest-keyword",
        "ini-addopts-m",
        "conftest-marker-then-args-m",
        "conftest-marker-in-modifyitems-then-args-m",
        "conftest-marker-then-args-k",
    ],
)
def test_a_filter_that_is_not_the_users_leaves_the_case_never_run(tmp_path, body, files, args):
    result = run(tmp_path, body, files, args)
    assert result.returncode != 0, result.output
    assert outcomes(result) == {
        "test_fixture.py::test_slow": "never_ran",
        "test_fixture.py::test_quick": "passed",
    }, result.output
    assert "defined but never ran: test_fixture.py::test_slow" in result.output


def test_a_conftest_keyword_does_not_join_the_test_filter(tmp_path):
    # --test_filter is the user's; a -k a conftest adds to it is not.
    env = bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="test_")
    result = run(tmp_path, SLOW_AND_QUICK, {"conftest.py": CONFTEST_SETS_KEYWORD}, env=env)
    assert result.returncode != 0, result.output
    assert outcomes(result)["test_fixture.py::test_slow"] == "never_ran", result.output


# 2. The user's own filters still excuse what they leave out.

SOURCE_MARKS = """
    import pytest

    pytestmark = pytest.mark.suite

    @pytest.mark.slow
    def test_slow():
        pass

    @pytest.mark.slow
    class TestSlow:
        def test_in_class(self):
            pass

    @pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.slow)])
    def test_param(n):
        pass

    def test_quick():
        pass
    """


def test_the_targets_m_on_the_sources_markers_excuses(tmp_path):
    # Function, class and parametrize marks.
    result = run(
        tmp_path, SOURCE_MARKS, {"conftest.py": REGISTERS_MARKERS}, args=("-m", "not slow")
    )
    assert result.returncode == 0, result.output
    assert outcomes(result) == {
        "test_fixture.py::test_quick": "passed",
        "test_fixture.py::test_param[1]": "passed",
    }, result.output


def test_the_targets_m_on_a_modules_marker_excuses(tmp_path):
    # Two sources in one target, the fixture's module marked `suite`, the other not.
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    files = {"conftest.py": REGISTERS_MARKERS}
    result = run(tmp_path, SOURCE_MARKS, files, args=("test_other.py", "-m", "not suite"))
    assert result.returncode == 0, result.output
    assert outcomes(result) == {"test_other.py::test_other": "passed"}, result.output


@pytest.mark.parametrize(
    "args, env",
    [
        (("-k", "quick"), {}),
        (("-m", "not slow"), {}),
        (("--deselect", "test_fixture.py::test_slow"), {}),
        ((), {"TESTBRIDGE_TEST_ONLY": "quick"}),
        ((), {"TORCH_TEST_NODE_IDS": '["test_fixture.py::test_quick"]'}),
    ],
    ids=["k", "m", "deselect", "test-filter", "node-ids"],
)
def test_the_users_own_filter_excuses(tmp_path, args, env):
    files = {"conftest.py": REGISTERS_MARKERS}
    result = run(tmp_path, SLOW_AND_QUICK, files, args=args, env=bazel_env(tmp_path, **env))
    assert result.returncode == 0, result.output
    assert outcomes(result) == {"test_fixture.py::test_quick": "passed"}, result.output


def test_the_users_filter_excuses_beside_a_conftests(tmp_path):
    # The user's -k excludes test_slow whatever the conftest's markexpr default also does.
    files = {"conftest.py": CONFTEST_DEFAULTS_MARKEXPR}
    result = run(tmp_path, SLOW_AND_QUICK, files, args=("-k", "quick"))
    assert result.returncode == 0, result.output
    assert outcomes(result) == {"test_fixture.py::test_quick": "passed"}, result.output


# 3. -o addopts: it replaces the ini file's addopts, and with it could switch the audit off,
# which alone fails a module skipped at import (the inventory finds no case in it): beside a
# file that passes, the target was green.

SKIPPED_AT_IMPORT = """
    import pytest

    pytest.skip("no reason anyone declared", allow_module_level=True)

    def test_never():
        pass
    """

NO_AUDIT = "-p no:torch_test_outcome_audit"


@pytest.mark.parametrize(
    "args, env",
    [
        (("-o", f"addopts={NO_AUDIT}"), {}),
        ((f"-oaddopts={NO_AUDIT}",), {}),
        (("--override-ini", f"addopts={NO_AUDIT}"), {}),
        ((f"--override-ini=addopts={NO_AUDIT}",), {}),
        ((), {"PYTEST_ADDOPTS": f"-o 'addopts={NO_AUDIT}'"}),
    ],
    ids=["o", "o-joined", "override-ini", "override-ini-equals", "pytest-addopts"],
)
def test_overriding_addopts_is_refused(tmp_path, args, env):
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    args = ("test_other.py", *args)
    result = run(tmp_path, SKIPPED_AT_IMPORT, args=args, env=bazel_env(tmp_path, **env))
    assert result.returncode == 2, result.output
    assert "torch_test: refusing pytest option(s) " in result.stderr, result.output
    assert "replaces the ini file's addopts" in result.stderr.splitlines()[-1], result.output


def test_only_an_override_of_addopts_is_refused():
    from tools.runner import refused_options

    given = ["-o=addopts=-x", "-o", "xfail_strict=true", "-oconsole_output_style=classic"]
    given += ["--override-ini=addopts_extra=1", "-k", "addopts=1"]
    assert refused_options.refused(given, {}) == ["-o=addopts=-x"]
    line = refused_options.message(["-o=addopts=-x"], "test_x.py")
    assert "\n" not in line and "replaces the ini file's addopts" in line


@pytest.mark.parametrize(
    "given, shown",
    [
        (["-qo", f"addopts={NO_AUDIT}"], f"-qo addopts={NO_AUDIT}"),
        ([f"-vsoaddopts={NO_AUDIT}"], f"-vsoaddopts={NO_AUDIT}"),
        (["-qpno:torch_test_outcome_audit"], "-qpno:torch_test_outcome_audit"),
        (["-vp", "no:tools.runner.session.plugin"], "-vp no:tools.runner.session.plugin"),
        (["-qh"], "-qh"),
    ],
    ids=["q-then-o", "vs-then-o-joined", "q-then-p-joined", "v-then-p", "q-then-help"],
)
def test_short_options_are_read_in_clusters(given, shown):
    # argparse reads `-qo V` as `-q -o V`: a cluster hides no option from the check.
    from tools.runner import refused_options

    assert refused_options.refused(given, {}) == [shown]


def test_a_value_is_no_cluster_of_options():
    # `-ko` is `-k o`, and `-k -h`'s value is not read as help: only options are checked.
    from tools.runner import refused_options

    given = ["-kohno", "-m", "addopts", "-rsx", "-W", "error", "-c", "-h.ini", "-k", "addopts="]
    assert refused_options.refused(given, {}) == []


def test_the_short_options_that_take_a_value_are_pytests():
    from _pytest.config import get_config

    from tools.runner import refused_options

    parser = get_config()._parser.optparser
    valued = {
        name[1]
        for action in parser._actions
        if action.nargs != 0
        for name in action.option_strings
        if not name.startswith("--")
    }
    assert valued == set(refused_options._SHORT_VALUED)
