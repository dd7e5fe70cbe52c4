"""Self-tests of the bytecode tests read (tools/runner/bytecode.py), through the runner.

That a test cannot write into @pypi's bytecode (the sandbox mounts it read-only) is checked
through Bazel by tools/selftest/check_bytecode_poison.sh.
"""

import os
import py_compile
import subprocess
import sys

import pytest

from tools.runner import bytecode
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


def _fake_torch(tmp_path, compiled: bool):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    source = site / "torch" / "__init__.py"
    source.write_text("__version__ = '1.0'\n")
    if compiled:
        # Beside the source, as a wheel ships it: not where this process's own prefix (the
        # runner gives tests @pypi's read-only bytecode where torch has none) would put it.
        cfile = source.parent / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(source), cfile=str(cfile), doraise=True)
    return site


def _fake_pypi(runfiles):
    """@pypi as the runner finds it: a runfile fingerprint.txt linking to the repository."""
    repo = runfiles / "output_base_pypi"
    (repo / bytecode.PREFIX_DIR).mkdir(parents=True)
    (repo / bytecode.FINGERPRINT).write_text("")
    (runfiles / "pypi").mkdir(parents=True, exist_ok=True)
    (runfiles / "pypi" / bytecode.FINGERPRINT).symlink_to(repo / bytecode.FINGERPRINT)
    return str(repo / bytecode.PREFIX_DIR)


def _run_with(tmp_path, site, **extra):
    report = tmp_path / "report.txt"
    env = bazel_env(tmp_path, REPORT=report, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    result = run_runner(write_tests(tmp_path, REPORTS_PREFIX), env)
    assert result.returncode == 0, result.stdout + result.stderr
    return report.read_text()


def test_torch_without_bytecode_reads_pypis_and_writes_none(tmp_path):
    prefix = _fake_pypi(tmp_path)
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=False))
    assert out == f"PREFIX={prefix} DONT_WRITE=1"


def test_without_pypis_bytecode_tests_write_none(tmp_path):
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=False))
    assert out == "PREFIX=None DONT_WRITE=1"


def test_torch_with_bytecode_keeps_its_own(tmp_path):
    _fake_pypi(tmp_path)
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=True))
    assert out == "PREFIX=None DONT_WRITE=1"


def test_users_prefix_wins(tmp_path):
    _fake_pypi(tmp_path)
    mine = str(tmp_path / "mine")
    out = _run_with(tmp_path, _fake_torch(tmp_path, compiled=False), PYTHONPYCACHEPREFIX=mine)
    assert out == f"PREFIX={mine} DONT_WRITE=0"


def test_no_torch_no_prefix(tmp_path, monkeypatch):
    monkeypatch.setattr(bytecode.importlib.util, "find_spec", lambda name: None)
    env = {}
    assert not bytecode.configure(env, str(tmp_path))
    assert env == {"PYTHONDONTWRITEBYTECODE": "1"}


def _compile(site, prefix):
    argv = [sys.executable, bytecode.__file__, "compile", str(prefix), str(site)]
    subprocess.run(argv, env={"PYTHONPATH": str(site)}, check=True)


def test_fetch_compiles_checked_hash_entries_under_the_prefix(tmp_path):
    site = _fake_torch(tmp_path, compiled=False)
    prefix = tmp_path / "pycache"
    _compile(site, prefix)
    source = site / "torch" / "__init__.py"
    tag = sys.implementation.cache_tag
    entry = prefix.joinpath(*source.parent.parts[1:], f"__init__.{tag}.pyc")
    assert entry.is_file(), sorted(str(p) for p in prefix.rglob("*.pyc"))[:5]
    flags = int.from_bytes(entry.read_bytes()[4:8], "little")
    assert flags == 0b11, "a checked-hash pyc (validated against its source on import)"
    assert not (source.parent / "__pycache__").exists(), "nothing written beside the sources"


def test_fetch_compiles_nothing_where_torch_has_bytecode(tmp_path):
    site = _fake_torch(tmp_path, compiled=True)
    prefix = tmp_path / "pycache"
    _compile(site, prefix)
    assert not prefix.exists()


@pytest.mark.parametrize("layout", ["pypi", "legacy"])
def test_prefix_is_found_through_the_fingerprint_runfile(tmp_path, layout):
    repo = tmp_path / "output_base" / "external" / "pypi"
    (repo / bytecode.PREFIX_DIR).mkdir(parents=True)
    (repo / bytecode.FINGERPRINT).write_text("")
    runfiles = tmp_path / "runfiles"
    where = runfiles / ("pypi" if layout == "pypi" else "ws/external/pypi")
    where.mkdir(parents=True)
    (where / bytecode.FINGERPRINT).symlink_to(repo / bytecode.FINGERPRINT)
    env = {"TEST_SRCDIR": str(runfiles), "TEST_WORKSPACE": "ws"}
    assert bytecode.precompiled_prefix(env) == str(repo / bytecode.PREFIX_DIR)
