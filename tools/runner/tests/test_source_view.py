"""tools/runner/source_view.py on a fake workspace and runfiles tree: what the view holds, and
that in it an undeclared file of the source tree is absent to C, stat and a child with a clean
environment, while declared files, the rest of the file system and the outer namespace are
as they were."""

import os
import subprocess
import sys

import pytest

from tools.runner import source_view

MODULE = "tools/runner/source_view.py"


@pytest.fixture
def tree(tmp_path):
    """A workspace with the module, a declared file, an undeclared one beside it, a source
    directory's file declared by glob; a runfiles tree linking to the declared ones through an
    execroot-like hop, as Bazel does; a repository whose root lies elsewhere."""
    workspace = tmp_path / "workspace"
    for relative in [MODULE, "pkg/declared.txt", "pkg/golden.txt", "pkg/goldens/a.txt"]:
        (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
        (workspace / relative).write_text(relative)
    execroot = tmp_path / "execroot"
    execroot.mkdir()
    for top in ("tools", "pkg"):
        (execroot / top).symlink_to(workspace / top)
    external = tmp_path / "external" / "pypi"
    (external / "site").mkdir(parents=True)
    (external / "site" / "mod.py").write_text("")
    runfiles = tmp_path / "t.runfiles"
    for relative in [MODULE, "pkg/declared.txt", "pkg/goldens/a.txt"]:
        link = runfiles / "ws" / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(execroot / relative)
    # Another path to a declared file: bound once, at its own path.
    (runfiles / "ws" / "alias").mkdir()
    (runfiles / "ws" / "alias" / "a.txt").symlink_to(execroot / "pkg/goldens/a.txt")
    # A generated file, first in the workspace's repository (os.walk yields a directory's files
    # before its subdirectories): that repository is walked whatever its first entry says.
    generated = tmp_path / "bazel-out" / "gen.txt"
    generated.parent.mkdir()
    generated.write_text("")
    (runfiles / "ws" / "gen.txt").symlink_to(generated)
    (runfiles / "pypi" / "site").mkdir(parents=True)
    (runfiles / "pypi" / "site" / "mod.py").symlink_to(external / "site" / "mod.py")
    env = {"RUNFILES_DIR": str(runfiles)}
    view = source_view.prepare(env, str(runfiles / "ws" / MODULE))
    assert view is not None
    return workspace, runfiles, view


def test_the_view_holds_what_the_runfiles_resolve_to_in_the_source_tree(tree):
    workspace, _, view = tree
    assert view.workspace == os.path.realpath(workspace)
    assert view.files == ["pkg/declared.txt", "pkg/goldens/a.txt", MODULE]


def test_a_source_directory_reaching_the_runfiles_through_any_rule_is_refused(tree):
    # A py_library's or filegroup's `data = ["goldens"]`: torch_test's loading-time check sees
    # only the target's own data, and Bazel 4.2.3 keys the directory, not its files, so an
    # edit inside it would keep a cached PASSED.
    workspace, runfiles, _ = tree
    (runfiles / "ws" / "pkg" / "goldens_dir").symlink_to(workspace / "pkg" / "goldens")
    env = {"RUNFILES_DIR": str(runfiles)}
    with pytest.raises(source_view.SourceViewError) as refused:
        source_view.prepare(env, str(runfiles / "ws" / MODULE))
    said = str(refused.value)
    assert "the source directory pkg/goldens" in said, said
    assert 'glob(["pkg/goldens/**"])' in said, said


def test_no_view_outside_bazels_runfiles_or_where_inputs_are_copies(tmp_path):
    assert source_view.prepare({}) is None
    assert source_view.prepare({"TEST_SRCDIR": str(tmp_path)}) is None  # the runner's self-tests
    copied = tmp_path / "t.runfiles" / "ws" / MODULE  # a remote worker's staged files
    copied.parent.mkdir(parents=True)
    copied.write_text("")
    assert source_view.prepare({"RUNFILES_DIR": str(tmp_path / "t.runfiles")}, str(copied)) is None


def test_a_place_the_test_needs_inside_the_source_tree_fails_closed(tree):
    workspace, runfiles, _ = tree
    env = {"RUNFILES_DIR": str(runfiles), "TEST_TMPDIR": str(workspace / "tmp")}
    with pytest.raises(source_view.SourceViewError, match="TEST_TMPDIR"):
        source_view.prepare(env, str(runfiles / "ws" / MODULE))


# Each line: what a read of the source tree saw in the view. C's fopen and stat via ctypes, a
# directory listing, a Python child started with an empty environment.
_PROBE = """
import ctypes, json, os, subprocess, sys
workspace = sys.argv[1]
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
def fopen(path):
    handle = libc.fopen(path.encode(), b"r")
    if handle:
        libc.fclose(ctypes.c_void_p(handle))
    return bool(handle)
child = subprocess.run(
    [sys.executable, "-c", "import os, sys; print(os.path.exists(sys.argv[1]))",
     os.path.join(workspace, "pkg/golden.txt")], env={}, capture_output=True, text=True)
try:
    open(os.path.join(workspace, "pkg/new.txt"), "w")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({
    "fopen golden": fopen(os.path.join(workspace, "pkg/golden.txt")),
    "fopen declared": fopen(os.path.join(workspace, "pkg/declared.txt")),
    "stat golden": os.path.exists(os.path.join(workspace, "pkg/golden.txt")),
    "listing": sorted(os.listdir(os.path.join(workspace, "pkg"))),
    "in source dir": open(os.path.join(workspace, "pkg/goldens/a.txt")).read(),
    "clean child sees golden": child.stdout.strip(),
    "wrote into the tree": wrote,
}))
"""


def _in_view(view, workspace) -> dict:
    """The probe run in a child that entered the view first (preexec_fn)."""
    import json

    def enter():
        # subprocess hides a preexec_fn's exception ("Exception occurred in preexec_fn"): say
        # it on the child's stderr, which the assertion below shows.
        try:
            view.preexec()
        except BaseException as error:
            os.write(2, f"entering the view: {type(error).__name__}: {error}\n".encode())
            os._exit(70)

    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(workspace)],
        preexec_fn=enter,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_in_the_view_an_undeclared_source_file_does_not_exist(tree):
    workspace, _, view = tree
    seen = _in_view(view, workspace)
    assert seen == {
        "fopen golden": False,
        "fopen declared": True,
        "stat golden": False,
        "listing": ["declared.txt", "goldens"],
        "in source dir": "pkg/goldens/a.txt",
        "clean child sees golden": "False",
        "wrote into the tree": False,
    }
    # The namespace was the child's: here the workspace is whole.
    assert (workspace / "pkg/golden.txt").read_text() == "pkg/golden.txt"
    assert not (workspace / "pkg/new.txt").exists()


def test_editing_or_creating_an_undeclared_file_changes_nothing_in_the_view(tree):
    workspace, _, view = tree
    before = _in_view(view, workspace)
    (workspace / "pkg/golden.txt").write_text("edited")
    (workspace / "pkg/other.txt").write_text("new")
    assert _in_view(view, workspace) == before


def test_enter_refuses_a_process_with_threads(tree):
    import threading

    _, _, view = tree
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with pytest.raises(source_view.SourceViewError, match="threads"):
            view.enter()
    finally:
        stop.set()
        thread.join()
