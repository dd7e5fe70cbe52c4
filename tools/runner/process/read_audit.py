"""Fails a test that opens a file of the source tree that is not among its declared inputs.

Bazel keys a cached result by the test's declared inputs only, and its sandbox still lets a test
read the rest of the source tree (`Path(__file__).resolve().parent / "golden.txt"` resolves the
runfile's symlink back into the workspace). An edit of such a file kept `(cached) PASSED`. So
every test process (the runner's pytest child, tools/runner/pytest_runner.py, before pytest
starts; each rank of test_utils.distributed; every other Python process the test starts,
through tools/runner/process/descendants.py) installs an audit hook on "open" (PEP 578:
open(), io.open_code for imports, os.open): a path whose real location lies in the source tree
and is not a declared input raises UndeclaredInput at the open and is appended to a record the
runner reads after the tests, so the target fails naming it even if the test swallowed the
error. A hook cannot be removed, and no argument, warning filter, conftest or variable of the
test turns it off: the runner installs it and sets its record (envvars.READ_AUDIT) itself.

What counts, without a list of allowed places:
  source tree      the directory the runfile of this very module resolves to, less its
                   runfiles path: the workspace (or, where inputs are copies, the runfiles tree)
  declared inputs  the files of the runfiles tree under the workspace's name (`data`, `srcs`,
                   deps): compared by path relative to the workspace. A source directory in the
                   runfiles declares the directory, not its files (Bazel does not key them).
Everything else (the interpreter's prefixes, @pypi and other repositories, TEST_TMPDIR and
TMPDIR, /proc, /dev, /sys, kernel and bytecode caches) lies outside the source tree and passes
once resolved (each directory's real path is kept: a file then costs one lstat); declared files
opened through the runfiles tree pass at once. A path that does not exist is no read.
Outside Bazel (no runfiles) nothing is installed. Standard library only.
"""

import os
import sys

from tools.hardware import envvars


class UndeclaredInput(RuntimeError):
    """Raised at the open of a source file the test does not declare."""


class Audit:
    def __init__(self, workspace: str, runfiles_workspace: str, declared: set[str], record: str):
        self.workspace = workspace  # real path of the source tree, no trailing slash
        self.runfiles_workspace = runfiles_workspace  # <runfiles>/<workspace name>
        self.declared = declared  # paths relative to the workspace
        self.record = record
        self.reported: set[str] = set()
        self._real_dirs: dict[str, str] = {}

    def _real(self, path: str, hops: int = 40) -> str:
        """os.path.realpath(path), each directory resolved once per process: a file costs one
        lstat (and a readlink where it is a link, as every runfile is), not one per component."""
        directory, name = os.path.split(path)
        real_dir = self._real_dirs.get(directory)
        if real_dir is None:
            real_dir = self._real_dirs[directory] = os.path.realpath(directory)
        full = os.path.join(real_dir, name)
        if hops and os.path.islink(full):
            return self._real(os.path.join(real_dir, os.readlink(full)), hops - 1)
        return full

    def undeclared(self, path: str) -> str | None:
        """The workspace-relative path `path` opens, if it is in the source tree but not
        declared; else None."""
        absolute = os.path.abspath(path)
        if absolute.startswith(self.runfiles_workspace + "/"):
            if absolute[len(self.runfiles_workspace) + 1 :] in self.declared:
                return None  # a declared runfile, by its runfiles path
        real = self._real(absolute)
        if not real.startswith(self.workspace + "/"):
            return None
        relative = real[len(self.workspace) + 1 :]
        if relative in self.declared or self._bytecode_of_declared(relative):
            return None
        # Opening a path that does not exist reads nothing. Where inputs are files, not links (a
        # remote worker's overlay or copies), the runfiles tree is the source tree and the
        # test's working directory, so a
        # name that is no file, e.g. "<string>" or "<eval_with_key>.3" tried by linecache and
        # inspect, lands in it and would fail the test instead of raising FileNotFoundError.
        if not os.path.lexists(real):
            return None
        return relative

    def _bytecode_of_declared(self, relative: str) -> bool:
        """`dir/__pycache__/name.<tag>.pyc` of a declared `dir/name.py`: Python's cache of an
        input (written beside the sources where the input tree is writable, as on a remote
        worker), keyed by that source, so it adds nothing Bazel does not key by."""
        directory, name = os.path.split(relative)
        parent, cache = os.path.split(directory)
        if cache != "__pycache__" or not name.endswith(".pyc"):
            return False
        return os.path.join(parent, name.split(".", 1)[0] + ".py") in self.declared

    def hook(self, event: str, args: tuple) -> None:
        if event != "open":
            return
        path = args[0]
        if not isinstance(path, str | bytes | os.PathLike):
            return  # a file descriptor
        try:
            relative = self.undeclared(os.fsdecode(path))
        except (OSError, ValueError):
            return
        if relative is None:
            return
        if relative not in self.reported:
            self.reported.add(relative)
            _append(self.record, relative)
        raise UndeclaredInput(message([relative]))


def _append(record: str, relative: str) -> None:
    # One write(2) per line to an O_APPEND file: ranks append to the same record.
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, relative.encode(errors="surrogateescape") + b"\n")
    finally:
        os.close(fd)


def message(paths: list[str]) -> str:
    listed = "\n  ".join(paths)
    return (
        "the test opened files of the source tree that are not among its inputs; Bazel does "
        "not key its result by them, so an edit would keep a cached PASSED. Declare them in "
        f'the target\'s data (a directory as glob(["dir/**"])):\n  {listed}'
    )


def _runfiles_dir(env) -> str | None:
    return env.get("RUNFILES_DIR") or env.get("TEST_SRCDIR") or None


def _declared(runfiles_workspace: str) -> set[str]:
    """Every entry of the runfiles tree under the workspace's name, relative to it; a symlink to
    a directory (a source directory in data) is one entry, not descended into."""
    found = set()
    for directory, subdirs, files in os.walk(runfiles_workspace):
        base = os.path.relpath(directory, runfiles_workspace)
        for name in files + [d for d in subdirs if os.path.islink(os.path.join(directory, d))]:
            found.add(os.path.normpath(os.path.join(base, name)))
    return found


def audit_from(env, module_file: str = __file__) -> Audit | None:
    """The audit of this process, or None outside Bazel's runfiles or without a record."""
    record = env.get(envvars.READ_AUDIT)
    runfiles = _runfiles_dir(env)
    if not record or not runfiles:
        return None
    runfiles = os.path.abspath(runfiles)
    module_file = os.path.abspath(module_file)
    if not module_file.startswith(runfiles + "/"):
        return None  # not imported from the runfiles tree (plain pytest of a checkout)
    in_runfiles = module_file[
        len(runfiles) + 1 :
    ]  # <workspace name>/tools/runner/process/read_audit.py
    name, _, in_workspace = in_runfiles.partition("/")
    real = os.path.realpath(module_file)
    if not real.endswith("/" + in_workspace):
        return None
    workspace = real[: -len(in_workspace) - 1]
    runfiles_workspace = os.path.join(runfiles, name)
    return Audit(workspace, runfiles_workspace, _declared(runfiles_workspace), record)


_installed: Audit | None = None


def install(env=os.environ) -> Audit | None:
    """Audits every open of this process from now on (and of processes it forks); once per
    process: a rank forked from a forkserver that installed it keeps the forkserver's."""
    global _installed
    if _installed is None:
        _installed = audit_from(env)
        if _installed is not None:
            sys.addaudithook(_installed.hook)
    return _installed


def recorded(record: str) -> list[str]:
    """The undeclared files the test's processes opened (the runner reads this after them)."""
    try:
        with open(record, errors="surrogateescape") as f:
            return sorted(set(f.read().splitlines()))
    except FileNotFoundError:
        return []
