"""tools/runner/process/read_audit.py on a fake workspace and runfiles tree: what counts as an
undeclared read of the source tree, and that the hook refuses it, records it once and cannot be
dodged through another path to the same file."""

import os
import subprocess
import sys

import pytest

from tools.hardware import envvars
from tools.runner.process import read_audit

MODULE = "tools/runner/process/read_audit.py"


@pytest.fixture
def tree(tmp_path):
    """A workspace with a module, a declared golden, an undeclared one and a source directory,
    and a runfiles tree linking to the declared ones as Bazel does."""
    workspace = tmp_path / "workspace"
    for relative in [MODULE, "pkg/declared.txt", "pkg/golden.txt", "pkg/goldens/a.txt"]:
        (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
        (workspace / relative).write_text(relative)
    runfiles = tmp_path / "t.runfiles"
    for relative in [MODULE, "pkg/declared.txt", "pkg/goldens"]:
        link = runfiles / "ws" / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(workspace / relative)
    env = {"RUNFILES_DIR": str(runfiles), envvars.READ_AUDIT: str(tmp_path / "record")}
    audit = read_audit.audit_from(env, str(runfiles / "ws" / MODULE))
    assert audit is not None
    return workspace, runfiles / "ws", audit


def test_the_source_tree_is_where_the_modules_runfile_resolves(tree):
    workspace, runfiles_workspace, audit = tree
    assert audit.workspace == os.path.realpath(workspace)
    assert audit.runfiles_workspace == str(runfiles_workspace)
    assert {MODULE, "pkg/declared.txt", "pkg/goldens"} <= audit.declared


def test_declared_inputs_pass_by_either_path(tree):
    workspace, runfiles_workspace, audit = tree
    assert audit.undeclared(str(runfiles_workspace / "pkg/declared.txt")) is None
    assert audit.undeclared(str(workspace / "pkg/declared.txt")) is None
    assert audit.undeclared(str(runfiles_workspace / "pkg/../pkg/declared.txt")) is None


def test_a_source_file_next_to_a_declared_one_is_undeclared(tree):
    workspace, runfiles_workspace, audit = tree
    # Path(__file__).resolve().parent / "golden.txt": the runfile resolved into the workspace.
    resolved_parent = (runfiles_workspace / "pkg/declared.txt").resolve().parent
    assert audit.undeclared(str(resolved_parent / "golden.txt")) == "pkg/golden.txt"


def test_a_file_inside_a_declared_source_directory_is_undeclared(tree):
    # Bazel keys a source directory by the directory alone.
    workspace, runfiles_workspace, audit = tree
    assert audit.undeclared(str(runfiles_workspace / "pkg/goldens/a.txt")) == "pkg/goldens/a.txt"


def test_the_bytecode_of_a_declared_module_is_no_input_but_other_bytecode_is(tree):
    # A remote worker's input tree is writable: Python caches a declared module beside it.
    workspace, _, audit = tree
    cache = workspace / "tools/runner/process/__pycache__"
    cache.mkdir()
    for name in ("read_audit.cpython-311.pyc", "golden.cpython-311.pyc"):
        (cache / name).write_bytes(b"")
    assert audit.undeclared(str(cache / "read_audit.cpython-311.pyc")) is None
    assert audit.undeclared(str(cache / "golden.cpython-311.pyc")) == (
        "tools/runner/process/__pycache__/golden.cpython-311.pyc"
    )


def test_a_link_elsewhere_into_the_workspace_is_followed(tree, tmp_path):
    workspace, _, audit = tree
    link = tmp_path / "scratch" / "innocent.txt"
    link.parent.mkdir()
    link.symlink_to(workspace / "pkg/golden.txt")
    assert audit.undeclared(str(link)) == "pkg/golden.txt"


def test_files_outside_the_workspace_pass(tree, tmp_path):
    _, _, audit = tree
    (tmp_path / "elsewhere.txt").write_text("x")
    for path in [str(tmp_path / "elsewhere.txt"), sys.executable, "/proc/self/status", "/dev/null"]:
        assert audit.undeclared(path) is None, path


def test_no_audit_outside_bazels_runfiles(tmp_path):
    assert read_audit.audit_from({envvars.READ_AUDIT: str(tmp_path / "r")}) is None
    assert read_audit.audit_from({"RUNFILES_DIR": str(tmp_path)}) is None  # no record: no runner
    env = {"RUNFILES_DIR": str(tmp_path), envvars.READ_AUDIT: str(tmp_path / "r")}
    assert read_audit.audit_from(env, "/elsewhere/" + MODULE) is None


_OPENER = """
import os, sys
from tools.runner.process import read_audit
audit = read_audit.audit_from(os.environ, sys.argv[1])
sys.addaudithook(audit.hook)
for path in sys.argv[2:]:
    try:
        open(path).close()
        print("opened", path)
    except read_audit.UndeclaredInput as error:
        print("refused", path, "|", str(error).splitlines()[-1].strip())
os.open(sys.argv[2], os.O_RDONLY)  # swallowed nowhere: must raise
"""


def test_the_hook_refuses_each_undeclared_open_and_records_it_once(tree, tmp_path):
    workspace, runfiles_workspace, audit = tree
    golden = str(workspace / "pkg/golden.txt")
    declared = str(runfiles_workspace / "pkg/declared.txt")
    env = {
        **os.environ,
        "RUNFILES_DIR": str(runfiles_workspace.parent),
        envvars.READ_AUDIT: audit.record,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    script = [sys.executable, "-c", _OPENER, str(runfiles_workspace / MODULE)]
    run = subprocess.run(
        [*script, golden, declared, golden], env=env, capture_output=True, text=True
    )
    assert run.stdout.splitlines() == [
        f"refused {golden} | pkg/golden.txt",
        f"opened {declared}",
        f"refused {golden} | pkg/golden.txt",
    ]
    assert "UndeclaredInput" in run.stderr and run.returncode != 0  # os.open refused too
    assert read_audit.recorded(audit.record) == ["pkg/golden.txt"]


@pytest.fixture
def copied_tree(tmp_path):
    """Inputs as files, not links, as a remote worker stages them: the runfiles tree is the
    source tree."""
    runfiles_workspace = tmp_path / "t.runfiles" / "ws"
    for relative in [MODULE, "pkg/declared.txt"]:
        (runfiles_workspace / relative).parent.mkdir(parents=True, exist_ok=True)
        (runfiles_workspace / relative).write_text(relative)
    env = {"RUNFILES_DIR": str(runfiles_workspace.parent), envvars.READ_AUDIT: str(tmp_path / "r")}
    audit = read_audit.audit_from(env, str(runfiles_workspace / MODULE))
    assert audit is not None and audit.workspace == os.path.realpath(runfiles_workspace)
    return runfiles_workspace, audit


def test_names_that_are_no_file_are_no_reads_where_inputs_are_files(copied_tree, monkeypatch):
    # linecache and inspect try names such as "<string>" relative to the working directory,
    # which on a worker is the source tree: nothing is read, so nothing is undeclared.
    runfiles_workspace, audit = copied_tree
    monkeypatch.chdir(runfiles_workspace)
    for name in ["<string>", "<eval_with_key>.49", "source", "pkg/missing.txt"]:
        assert audit.undeclared(name) is None, name
    assert audit.undeclared("pkg/declared.txt") is None
