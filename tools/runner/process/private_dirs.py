"""The rule for caches kept in shared places such as /tmp: a folder only its user can use.

Inductor's kernels, the vector-ISA memo and bench's bytecode live in /tmp, where any user may
create a folder first. A folder another user made, or that others may write, can hold forged
entries (a kernel, a probe's pass, a .pyc) that a test would load as its own. So such a folder
is created 0700 (missing parents too), and used only if it is a real directory (not a link)
that this user owns and no one else may enter, inside parents that only root or this user may
change (a shared parent must be sticky, as /tmp is). Anything else is refused, never read.
"""

import os
import pathlib
import stat

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["ensure"]


class NotPrivate(Exception):
    """A cache folder that others made or may use."""


def ensure(path: str | os.PathLike) -> pathlib.Path:
    """`path`, created 0700 if missing; raises NotPrivate if it is not this user's alone."""
    path = pathlib.Path(os.path.abspath(path))
    for folder in reversed([path, *path.parents]):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    for parent in path.parents:
        _check_parent(parent, path)
    _check(path)
    return path


def _check(path: pathlib.Path) -> None:
    # lstat: a link would let whoever made it point the cache anywhere.
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        _refuse(path, "it is not a directory (a link or a file)")
    if info.st_uid != os.getuid():
        _refuse(path, f"it belongs to uid {info.st_uid}, not to you (uid {os.getuid()})")
    if info.st_mode & 0o077:
        _refuse(
            path, f"its mode is {stat.S_IMODE(info.st_mode):04o}: others may use it (want 0700)"
        )


def _check_parent(parent: pathlib.Path, path: pathlib.Path) -> None:
    info = os.lstat(parent)
    if info.st_uid not in (0, os.getuid()):
        _refuse(path, f"its parent {parent} belongs to uid {info.st_uid}")
    shared = info.st_mode & 0o022 and not stat.S_ISLNK(info.st_mode)  # a link's mode is 0777
    if shared and not info.st_mode & stat.S_ISVTX:
        _refuse(path, f"others may rename entries of its parent {parent} (not sticky)")


def _refuse(path: pathlib.Path, problem: str) -> None:
    raise NotPrivate(
        f"refusing the cache folder {path}: {problem}. Its entries could be forged, so nothing "
        f"in it is read; remove it (rm -rf {path}) and run again."
    )
