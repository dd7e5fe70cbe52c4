"""The runner's short private directory under /tmp, and removal of those of dead runners.

TEST_TMPDIR is too long for AF_UNIX socket paths (108 bytes), which multiprocessing and gloo
create under TMPDIR, so each runner makes /tmp/torch_test-XXXXXXXX. The runner removes it when
its tests end; a runner killed outright (SIGKILL) cannot, so each new runner first removes the
directories of dead ones. "Dead" is decided by a lock, not by a pid: Bazel's sandboxes have
their own pid namespaces, where pids repeat, while an flock is released by the kernel when its
holder dies, whatever the namespace. The lock file is locked under a temporary name and then
renamed to `owner.lock`, so a sweeper never sees an unlocked lock of a live runner.
"""

import contextlib
import fcntl
import glob
import os
import shutil
import tempfile

from tools.runner.process import lifetime

PREFIX = "torch_test-"
LOCK = "owner.lock"


@contextlib.contextmanager
def private_tmp(parent: str = "/tmp"):
    """A fresh directory, locked while the block runs, removed after it."""
    remove_stale(parent)
    path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
    fd = os.open(os.path.join(path, LOCK + ".new"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(os.path.join(path, LOCK + ".new"), os.path.join(path, LOCK))
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def remove_stale(parent: str = "/tmp") -> list[str]:
    """Removes the directories whose owner lock nobody holds; returns them."""
    removed = []
    for lock in glob.glob(os.path.join(parent, PREFIX + "*", LOCK)):
        try:
            if lifetime.is_held(lock):
                continue  # a live runner holds it
        except OSError:
            continue  # another user's, or removed meanwhile
        # Its owner is dead: a renamed lock file never gets another.
        shutil.rmtree(os.path.dirname(lock), ignore_errors=True)
        removed.append(os.path.dirname(lock))
    return removed
