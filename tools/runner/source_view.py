"""The test's view of the source tree: its declared inputs and nothing else, enforced by the OS.

Bazel keys a cached result by the test's declared inputs only, yet a test (locally, in
linux-sandbox too) can reach the whole source tree: a runfile's symlink resolves into the
workspace, and `Path(__file__).resolve().parent / "golden.txt"` is then any file beside it. An
audit hook on Python's `open` (this project's first answer) could not see a read in C
(`torch.from_file`, `torch.jit.load`, sqlite), a `stat` (`Path.exists()`), or a process whose
Python skips our sitecustomize (`env={}`), so such a test kept `(cached) PASSED` after an edit.

So the runner, before it starts anything, moves itself into a mount namespace of its own
(`enter`) in which the workspace is an empty read-only tmpfs holding, bind-mounted at their own
paths, exactly the files the runfiles tree resolves to inside it. Every process the runner
starts (the test process, the inventory, ranks, any subprocess, whatever its language or
environment) inherits that namespace: an undeclared file of the source tree does not exist
there, for `open`, `fopen`, `stat` and directory listings alike, so editing or creating it
cannot change a result. The rest of the file system (the output base with @pypi, the
sandbox, /tmp, /dev, the interpreter) is untouched.

What counts:
  source tree      the real directory the runfile of this very module resolves to, less its
                   runfiles path. Where it is the runfiles tree itself (inputs are copies, as
                   a remote worker stages them) nothing else of the source tree is there to
                   hide, and there is no view.
  declared inputs  every file of the runfiles tree whose real path lies in the source tree.
                   A source directory there, through any rule (a py_library's or filegroup's
                   `data`), is refused with its fix: Bazel 4.2.3 keys the directory, not its
                   files, so an edit inside would keep a cached result (torch_test refuses one
                   in the target's own `data` at loading time, but cannot see through other
                   rules). Repositories of the runfiles tree whose root lies outside the source
                   tree (@pypi's) are not walked.
A file the view lacks is absent, so a wrong guess fails the test; it never passes stale.

Fails closed: where the runfiles resolve into a source tree but the namespace cannot be made
(no CAP_SYS_ADMIN and no user namespaces, threads already running), `enter` raises
SourceViewError and the runner fails the target with its message. As root (linux-sandbox runs
tests as root in its user namespace) it unshares the mount namespace; otherwise it first makes
a user namespace mapping only its own uid and gid. Outside Bazel's runfiles (a plain
`python3 pytest_runner.py`) there is no view. Standard library only.
"""

import ctypes
import dataclasses
import errno
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

# Entries of a repository tried to find where its root resolves before walking all of it.
_ROOT_PROBES = 50


class SourceViewError(RuntimeError):
    """The view could not be made where the test could otherwise read the whole source tree."""


def _message(why: str) -> str:
    return (
        "cannot hide the source files this target does not declare (a mount namespace in which "
        f"only its inputs exist, tools/runner/source_view.py): {why}"
    )


@dataclasses.dataclass
class View:
    workspace: str  # real path of the source tree
    files: list[str]  # workspace-relative paths bound back

    def enter(self) -> None:
        """From now on this process, and every process it starts, sees only the view. Call it
        while the process has one thread (or pass it as a Popen's preexec_fn)."""
        try:
            self._enter()
        # A folder or mount point of the view that cannot be made; unshare or mount refused.
        except (OSError, SourceViewError) as error:
            raise SourceViewError(_message(str(error))) from None

    def _enter(self) -> None:
        unshare(CLONE_NEWNS)
        # Nothing we mount may propagate back into the namespace we came from.
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        # Opened in the new namespace (a bind's source must be a mount of the caller's), before
        # the workspace is covered: the covered tree stays reachable through it.
        source = os.open(self.workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            mount("tmpfs", self.workspace, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
            original = f"/proc/self/fd/{source}"
            for relative in self.files:
                target = os.path.join(self.workspace, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o444))
                mount(os.path.join(original, relative), target, None, MS_BIND)
            # As linux-sandbox leaves the source tree: nothing new can be written into it.
            mount(None, self.workspace, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        finally:
            os.close(source)

    preexec = enter


_libc = None


def _call(name: str, *args) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if getattr(_libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def mount(source, target, fstype, flags: int, data=None) -> None:
    """mount(2); SourceViewError with its reason (View.enter says what it was for)."""

    def encoded(value):
        return None if value is None else os.fsencode(value)

    try:
        _call(
            "mount",
            encoded(source),
            encoded(target),
            encoded(fstype),
            ctypes.c_ulong(flags),
            encoded(data),
        )
    except OSError as error:
        raise SourceViewError(f"mount {source} on {target}: {error.strerror}") from None


def unshare(flags: int) -> None:
    """unshare(2) of `flags` (namespaces) for this process, which must have one thread; where
    it is not root, in a user namespace of its own ids, which gives it the capability to."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # unshare moves the calling thread alone: the others would see everything
        raise SourceViewError(f"the process has {threads} threads; enter it with one")
    try:
        _call("unshare", flags)
        return
    except OSError as error:
        if error.errno != errno.EPERM or os.geteuid() == 0:
            raise SourceViewError(f"unshare({flags:#x}): {error.strerror}") from None
    uid, gid = os.geteuid(), os.getegid()
    try:
        _call("unshare", CLONE_NEWUSER | flags)
    except OSError as error:
        raise SourceViewError(
            f"unshare(CLONE_NEWUSER | {flags:#x}) as uid {uid}: {error.strerror}"
        ) from None
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


class _Resolver:
    """os.path.realpath of many links, each directory resolved once (a link costs one lstat
    and one readlink, not one per component)."""

    def __init__(self):
        self._dirs: dict[str, str] = {}

    def real(self, path: str, hops: int = 40) -> str:
        directory, name = os.path.split(path)
        real_dir = self._dirs.get(directory)
        if real_dir is None:
            real_dir = self._dirs[directory] = os.path.realpath(directory)
        full = os.path.join(real_dir, name)
        if hops and os.path.islink(full):
            return self.real(os.path.join(real_dir, os.readlink(full)), hops - 1)
        return full


def _entries(top: str):
    """Every file of the runfiles tree under `top`, and every link to a directory (not
    descended into), as (path, relative to top)."""
    for directory, subdirs, files in os.walk(top):
        links = [d for d in subdirs if os.path.islink(os.path.join(directory, d))]
        for name in files + links:
            path = os.path.join(directory, name)
            yield path, os.path.relpath(path, top)


def _outside(repository: str, workspace: str, resolver: _Resolver) -> bool:
    """Whether a repository of the runfiles tree resolves into a root outside the source tree:
    an entry's real path ends with its path in the repository, so the root is the rest."""
    for count, (path, relative) in enumerate(_entries(repository)):
        if count >= _ROOT_PROBES:
            break
        real = resolver.real(path)
        if real.endswith("/" + relative):
            return not _inside(real[: -len(relative) - 1], workspace)
    return False  # unknown: walk it all


def _inside(path: str, workspace: str) -> bool:
    return path == workspace or path.startswith(workspace + "/")


def declared(runfiles: str, workspace: str, own: str) -> list[str]:
    """The files of the source tree that the runfiles tree resolves to, relative to the
    workspace; `own` is the workspace's repository in the runfiles tree. Raises SourceViewError
    for a source directory among them."""
    resolver = _Resolver()
    files, dirs = set(), set()
    for name in sorted(os.listdir(runfiles)):
        repository = os.path.join(runfiles, name)
        if not os.path.isdir(repository) or os.path.islink(repository):
            continue  # MANIFEST, __init__.py, _repo_mapping
        if repository != own and _outside(repository, workspace, resolver):
            continue
        for path, _ in _entries(repository):
            real = resolver.real(path)
            if real.startswith(workspace + "/"):
                (dirs if os.path.isdir(real) else files).add(real[len(workspace) + 1 :])
    if dirs:
        shown = ", ".join(sorted(dirs))
        first = sorted(dirs)[0]
        raise SourceViewError(
            f"the runfiles hold the source directory {shown}, through a rule that lists it "
            "whole (a py_library's or filegroup's data): Bazel 4.2.3 keys the directory, not "
            "its files, so an edit inside it would keep a cached result; list its files "
            f'there instead, e.g. glob(["{first}/**"])'
        )
    return sorted(files)


def _runfiles_dir(env) -> str | None:
    return env.get("RUNFILES_DIR") or env.get("TEST_SRCDIR") or None


def _source_tree(runfiles: str, module_file: str) -> tuple[str, str] | None:
    """(real path of the source tree, runfiles path of the workspace), or None where this
    module does not come from the runfiles tree or is not a link into a source tree."""
    runfiles = os.path.abspath(runfiles)
    module_file = os.path.abspath(module_file)
    if not module_file.startswith(runfiles + "/"):
        return None  # not imported from the runfiles tree (plain python of a checkout)
    name, _, in_workspace = module_file[len(runfiles) + 1 :].partition("/")
    real = os.path.realpath(module_file)
    if not real.endswith("/" + in_workspace):
        return None
    return real[: -len(in_workspace) - 1], os.path.join(runfiles, name)


def _needed_inside(env, workspace: str) -> list[str]:
    """Places the test's processes need that the view would hide: they lie in the source tree."""
    places = {
        "the runfiles tree": _runfiles_dir(env),
        "the working directory": os.getcwd(),
        "TEST_TMPDIR": env.get("TEST_TMPDIR"),
        "TMPDIR": env.get("TMPDIR"),
        "the interpreter": sys.executable,
        "the interpreter's prefix": sys.prefix,
        "the interpreter's base prefix": sys.base_prefix,
    }
    return [
        f"{what} ({path})"
        for what, path in places.items()
        if path and _inside(os.path.realpath(path), workspace)
    ]


def prepare(env=os.environ, module_file: str = __file__) -> View | None:
    """The view this test's processes must see, or None where there is nothing to hide
    (outside Bazel's runfiles; inputs that are copies). Raises SourceViewError where the view
    would hide what the test needs."""
    runfiles = _runfiles_dir(env)
    if not runfiles:
        return None
    found = _source_tree(runfiles, module_file)
    if found is None:
        return None
    workspace, runfiles_workspace = found
    if workspace == os.path.realpath(runfiles_workspace) or workspace == "/":
        return None  # the inputs are the tree (a remote worker's staged copies)
    inside = _needed_inside(env, workspace)
    if inside:
        raise SourceViewError(
            _message(f"these lie inside the source tree {workspace}: " + "; ".join(inside))
        )
    return View(workspace, declared(runfiles, workspace, runfiles_workspace))


def enter(env=os.environ) -> View | None:
    """The runner's one call, before it starts any process or thread: this process and all it
    starts see only the declared inputs of the source tree. Returns the view (None: nothing to
    hide); raises SourceViewError where it must be made and cannot."""
    view = prepare(env)
    if view is not None:
        view.enter()
    return view
