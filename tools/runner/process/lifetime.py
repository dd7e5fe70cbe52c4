"""Process lifetime helpers the runner and the multi-process harness share (Linux only).

Both decide liveness by the kernel, never by pids: Bazel's sandboxes have their own pid
namespaces, where pids repeat, while a parent-death signal and an flock follow the process.
"""

import ctypes
import fcntl
import os
import signal

_PR_SET_PDEATHSIG = 1
# A group kill (Bazel's timeout) and the runner's forward of it are one request, not two.
SIGTERM_REPEAT_WINDOW_S = 1.0


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Gets `sig` when this process's parent dies (even by SIGKILL); at once if it already has."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (AttributeError, OSError):
        return  # not Linux: the parent's own cleanup is the only one
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), sig)


def is_held(path: str) -> bool:
    """Whether a live process holds an flock on `path` (the kernel drops it when it dies).

    A descriptor of this process's own elsewhere counts as held. Raises OSError where `path`
    cannot be opened (removed meanwhile, another user's).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
