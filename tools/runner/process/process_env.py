"""The one writer of os.environ: processes that adopt the environment composed for them.

The runner composes the test's environment in one place (pytest_runner.run) and hands it to the
test process explicitly. Python's multiprocessing takes no environment for the processes it
starts (forkserver and spawn children inherit os.environ), so three processes set their own,
here and nowhere else:
  - the test process exports its thread budget, for the rank processes its tests start;
  - a rank, forked from a forkserver that started before the test changed its environment,
    adopts the test's environment of the moment (test_utils/rank_process.py);
  - the forkserver starts with a variable set for its start only (test_utils/distributed.py).
Standard library only.
"""

import contextlib
import os
from collections.abc import Mapping


def export(added: Mapping[str, str | None]) -> None:
    """Adds `added` to this process's environment, for the processes it starts from now on; a
    value None removes its name."""
    for name, value in added.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def adopt(env: Mapping[str, str]) -> None:
    """Replaces this process's environment with `env`."""
    os.environ.clear()
    os.environ.update(env)


@contextlib.contextmanager
def while_starting(name: str, value: str):
    """`name=value` for the processes started inside the block; the old value restored after."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
