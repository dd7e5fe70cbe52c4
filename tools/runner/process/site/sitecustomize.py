"""Python imports this at the start of every process a test starts: see ../descendants.py.

It is first on those processes' PYTHONPATH, so it hides the interpreter's own sitecustomize
(Debian's Python has one); that one is run after ours, from the next entry of sys.path that
holds it.
"""

import importlib.util
import os
import sys


def _ours() -> bool:
    """Whether tools.runner.process.descendants is the module beside this file (the test's
    PYTHONPATH holds the workspace), not another `tools` package, and this interpreter can run
    it (the tools need Python 3.10; a test may start an older interpreter of its own)."""
    if sys.version_info < (3, 10):  # noqa: UP036 (not the tools' interpreter: a test's own)
        return False
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        spec = importlib.util.find_spec("tools.runner.process.descendants")
    except ImportError:
        return False
    return bool(spec and spec.origin) and os.path.dirname(spec.origin) == here


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.abspath(entry or ".") != here and os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_next_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


if _ours():
    try:
        from tools.runner.process import descendants

        descendants.install()
    except BaseException as error:  # fail closed: a test's process must not run unchecked
        print(
            f"torch_test: the checks of a test's process failed to install: {error!r}",
            file=sys.stderr,
        )
        os._exit(70)
_run_next_sitecustomize()
