"""Self-tests of the shared bytecode cache (tools/runner/bytecode.py), through the runner."""

import os
import pathlib
import py_compile
import shutil
import sys

import pytest

from tools.runner import bytecode
from tools.runner.pytest_runner import BYTECODE_CACHE
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

# The test process reports, in the file REPORT names, the bytecode prefix Python uses and
# whether it may write bytecode (pytest captures a passing test's output).
REPORTS_PREFIX = """
import os
import sys

def test_report():
    with open(os.environ["REPORT"], "w") as report:
        report.write(f"PREFIX={sys.pycache_prefix} DONT_WRITE={sys.flags.dont_write_bytecode}")
"""


@pytest.fixture(autouse=True)
def _forget_this_tests_dirs():
    # The runners started here write, into the host's shared cache, entries for this test's
    # runfiles (the runner's modules) and its TEST_TMPDIR (tmp_path); Bazel's runner for this
    # test forgets nothing (the pinned torch ships bytecode), so the test removes them itself.
    yield
    bytecode.forget_test_dirs({**os.environ, "PYTHONPYCACHEPREFIX": BYTECODE_CACHE}, BYTECODE_CACHE)


def _fake_torch(tmp_path, compiled: bool):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    source = site / "torch" / "__init__.py"
    source.write_text("")
    if compiled:
        py_compile.compile(str(source), doraise=True)
    return site


def _run_with(tmp_path, site, **extra):
    report = tmp_path / "report.txt"
    env = bazel_env(tmp_path, REPORT=report, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    result = run_runner(write_tests(tmp_path, REPORTS_PREFIX), env)
    assert result.returncode == 0, result.stdout + result.stderr
    return report.read_text()


def test_torch_without_bytecode_gets_the_shared_cache(tmp_path):
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=False))
    assert out == f"PREFIX={BYTECODE_CACHE} DONT_WRITE=0"


def test_torch_with_bytecode_keeps_its_own(tmp_path):
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=True))
    assert out == "PREFIX=None DONT_WRITE=1"


def test_torch_tests_own_setting_does_not_stop_the_shared_cache(tmp_path):
    # torch_test sets PYTHONDONTWRITEBYTECODE=1 for every process; the runner lifts it for its
    # tests when they get the shared cache.
    site = _fake_torch(tmp_path, compiled=False)
    out = _run_with(tmp_path, site, PYTHONDONTWRITEBYTECODE="1")
    assert out == f"PREFIX={BYTECODE_CACHE} DONT_WRITE=0"


def test_users_prefix_wins(tmp_path):
    mine = str(tmp_path / "mine")
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=False), PYTHONPYCACHEPREFIX=mine)
    assert out == f"PREFIX={mine} DONT_WRITE=0"


def test_no_torch_no_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(bytecode.importlib.util, "find_spec", lambda name: None)
    env = {}
    assert not bytecode.configure(env, str(tmp_path))
    assert env == {"PYTHONDONTWRITEBYTECODE": "1"}


def _cached(source: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(BYTECODE_CACHE + str(source.parent)) / (
        f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    )


def test_test_dirs_entries_are_forgotten(tmp_path, tmp_path_factory):
    # The test's own sources (under TEST_SRCDIR and TEST_TMPDIR) leave no entry; the packages'
    # entries stay.
    site = _fake_torch(tmp_path_factory.mktemp("site"), compiled=False)
    (site / "package.py").write_text("")
    runfiles = tmp_path / "runfiles"
    runfiles.mkdir()
    (runfiles / "helper.py").write_text("")
    body = "import helper\nimport made_in_tmpdir\nimport package\n" + REPORTS_PREFIX
    test_file = write_tests(runfiles, body)
    env = bazel_env(tmp_path, REPORT=tmp_path / "report.txt", TEST_SRCDIR=runfiles)
    (pathlib.Path(env["TEST_TMPDIR"]) / "made_in_tmpdir.py").write_text("")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(site), str(runfiles), env["TEST_TMPDIR"], env["PYTHONPATH"]]
    )
    try:
        result = run_runner(test_file, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert _cached(site / "package.py").is_file()
        assert not pathlib.Path(BYTECODE_CACHE + str(runfiles)).exists()
        assert not pathlib.Path(BYTECODE_CACHE + env["TEST_TMPDIR"]).exists()
    finally:
        shutil.rmtree(BYTECODE_CACHE + str(site), ignore_errors=True)
