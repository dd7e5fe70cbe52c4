"""The test process: pytest on the target's sources, or the inventory of them, run by the runner.

    python -m tools.runner.session.child --session LEDGER_FD PYTEST_ARGS...
    python -m tools.runner.session.child --session LEDGER_FD --fork-inventory OUT_FD WORKDIR \
        ARGS_JSON PYTEST_ARGS...
    python -m tools.runner.session.child --inventory OUT_FD PYTEST_ARGS...

LEDGER_FD and OUT_FD: descriptors the runner hands the process (tools/runner/witness.py
Stream), which it reads as they are written: no file of them lies where a test could rewrite it.

--session runs the tests, with the ledger (ledger.py), shard and node-id selection and the
thread budget as plugins; it dies with the runner, dumps every thread's stack on Bazel's
timeout SIGTERM, then interrupts the tests so the multi-process harness kills its ranks.
--inventory collects the sources with their conftests, apart from the tests' args, ini file and
plugins, and runs nothing (inventory.py). The runner (tools/runner/pytest_runner.py) judges
what both leave behind.
Both end without the interpreter's teardown (`exit_without_teardown`).

--fork-inventory: one torch import serves both. The test process imports pytest and torch (where
the sources import it or the test library), nothing of the target's yet, then forks the
inventory: the fork has loaded no conftest, plugin, argument or test module of the target (it
loads the conftests itself), so what it collects is what a process of its own would collect, for
the price of none. The runner asks for it where it needs no other hash seed than the tests' (an
unsharded target: the shards' stability check compares two seeds, tools/runner/collection.py).
"""

import contextlib
import faulthandler
import gc
import importlib.util
import json
import os
import signal
import sys
import time
import traceback

from tools.hardware import variants
from tools.runner.process import descendants, lifetime, process_env, witness
from tools.runner.session import ledger as ledger_plugin
from tools.runner.session import node_ids, threads, user_filter

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["COMMAND", "INVENTORY"]

COMMAND = [sys.executable, "-m", "tools.runner.session.child"]
SESSION, INVENTORY, FORK_INVENTORY = "--session", "--inventory", "--fork-inventory"
NO_TESTS = "no tests selected in this target (variant {variant}{filter}): check markers and filter"


def _install_sigterm_handler(ledger: int) -> None:
    # pytest captures fd 2 while a test runs; the dump must reach the real test log.
    log = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
    first_at = []

    def on_sigterm(signum, frame):
        if first_at:
            if time.monotonic() - first_at[0] < lifetime.SIGTERM_REPEAT_WINDOW_S:
                return  # one timeout, sent to our process group and forwarded by the runner
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a later SIGTERM kills at once
            os.kill(os.getpid(), signal.SIGTERM)
            return
        first_at.append(time.monotonic())
        # pytest's own record of the running test: the gate names the hung case by it.
        running = os.environ.get("PYTEST_CURRENT_TEST")
        where = f" while running {running}" if running else ""
        print(f"\n*** SIGTERM (Bazel timeout?){where}: stacks of all threads ***", file=log)
        faulthandler.dump_traceback(file=log, all_threads=True)
        # The same for the runner's record (tools/results/record.py), which no log is read for:
        # the test's thread, as faulthandler writes a frame, innermost last.
        stack = "\n".join(
            f'  File "{f.filename}", line {f.lineno} in {f.name}'
            for f in traceback.extract_stack(frame)
        )
        # pytest's value is `NODEID (PHASE)`: the record names the case.
        said = {"running": (running or "").rsplit(" (", 1)[0], "stack": stack}
        ledger_plugin.write(ledger, ledger_plugin.INTERRUPTED, json.dumps(said))
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)


def _exit_code(code: int, selector, env) -> int:
    import pytest

    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        if selector.selected_before_sharding > 0:
            return 0  # this shard is empty, others have tests
        test_filter = env.get("TESTBRIDGE_TEST_ONLY")
        shown = f", filter {test_filter!r}" if test_filter else ""
        print(NO_TESTS.format(variant=variants.current_variant(), filter=shown), file=sys.stderr)
        return 1
    return int(code)


def session(ledger: int, args: list[str], env=os.environ) -> int:
    """The child: runs pytest on `args`, recording its progress in the ledger (descriptor
    `ledger`, which the processes the tests start do not inherit)."""
    os.set_inheritable(ledger, False)
    descendants.export(env)  # the Python processes the tests start check themselves too
    witness.install_session(env)  # before pytest starts: what each test body does
    import pytest

    from tools.runner.session import sharding

    lifetime.die_with_parent(signal.SIGTERM)
    faulthandler.enable()
    _install_sigterm_handler(ledger)
    selector = sharding.ShardSelector.from_env(env)
    # Before torch's import; cases with recorded seconds budget for the tests expected beside them.
    budget = threads.ThreadBudget.start(
        env, process_env.export, selector.durations, selector.recorded_seconds()
    )
    by_id = node_ids.NodeIdSelector.from_env(env)  # exact re-runs (the gate's)
    # The user's filter as given, before pytest reads an ini file or a conftest (user_filter.py).
    user = user_filter.UserFilter(args, env, by_id)
    plugins = [selector, ledger_plugin.plugin(ledger, selector, user), budget, _SourcesFirst(args)]
    if by_id:
        plugins.append(by_id)
    code = pytest.main(args, plugins=plugins)
    witness.report_kept_coroutines()
    return _exit_code(code, selector, env)


def inventory_env(env, workdir: str) -> dict[str, str]:
    """What the inventory's process changes of the tests' environment: nothing the target
    configures reaches it (no user options), no shard's index (every shard's inventory is one
    collection, tools/runner/collection.py), another TMPDIR (ids built from the process's
    temporary directory differ between shards, each of which has its own), and one OpenMP
    thread (it runs no test; a thread per core only spins while torch imports: bench/scale.py
    --breakdown; bench/results/scale_2026-11-26_nvidia-h100-x1.md)."""
    tmp = os.path.join(workdir, "inventory_tmp")
    os.makedirs(tmp, exist_ok=True)
    unset = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "TEST_SHARD_INDEX", "TEST_TOTAL_SHARDS")
    changed = {k: None for k in unset if k in env}
    return {**changed, "TMPDIR": tmp, "OMP_NUM_THREADS": "1"}


def _imports_torch(files: list[str]) -> bool:
    """Whether a source imports torch, or the test library (which does), at its top level or
    anywhere: what decides that preloading torch saves its second import rather than adding
    one (a host interpreter has torch for every target)."""
    import ast

    for path in files:
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue  # the session's own collection says what is wrong with it
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                names = [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            if any(_loads_torch(name) for name in names):
                return True
    return False


# Top-level packages whose import imports torch: torch's, and the test library's, but for its
# torch-free modules (the hardware markers, which CPU-only tests and the tools import).
_TORCH_IMPORTERS = ("torch", "test_utils")
_TORCH_FREE = ("test_utils.hardware",)


def _loads_torch(name: str) -> bool:
    """Whether importing `name` (a module, or module.attribute of a from-import) loads torch."""
    if any(name == free or name.startswith(free + ".") for free in _TORCH_FREE):
        return False
    return name.split(".")[0] in _TORCH_IMPORTERS


@contextlib.contextmanager
def _collector_paused():
    """The cyclic collector off while the preload imports, as it was after: an import builds
    objects that live as long as the process, yet their growing count sets off collection
    after collection walking them (bench/results/runner_cost_2026-11-28_cpu.md)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _preload(files: list[str]) -> None:
    """pytest, and torch where the sources import it, imported before the fork, once for
    both processes."""
    with _collector_paused():
        import pytest  # noqa: F401

        if not _imports_torch(files) or importlib.util.find_spec("torch") is None:
            return
        # One OpenMP thread while torch loads (the inventory's); the session's budget sets its own.
        with process_env.while_starting("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1")):
            try:
                import torch  # noqa: F401
            except Exception:  # the tests' own import says why, where they import it
                return
        gc.collect()  # the imports' garbage, once: freed, not frozen
    # What torch's import built lives as long as the process, yet the cyclic collector walked
    # all of it again in every full collection while the tests import dynamo and inductor and
    # compile (bench/results/runner_cost_2026-11-28_cpu.md). Frozen (gc.freeze, CPython's
    # answer to this), the collector skips it, and the forked inventory shares its pages
    # untouched. Nothing of the target's has run yet: no object of a test's is frozen.
    gc.freeze()


class _SourcesFirst:
    """pytest plugin: refuses a session that would collect a path given after an option (the
    target's args, the command line, PYTEST_ADDOPTS). The inventory reads the sources before
    the first option (`sources`), so it would never see that path's cases, and what a conftest
    dropped of them would pass unseen."""

    def __init__(self, args: list[str]):
        self.known = {_path_of(arg) for arg in sources(args)}

    def pytest_configure(self, config):
        late = [arg for arg in config.args if _path_of(arg) not in self.known]
        if late:
            import pytest

            raise pytest.UsageError(
                f"torch_test: {' '.join(late)} given after an option: the runner reads a "
                "target's sources before its first option only; put it before the options"
            )


def _path_of(arg: str) -> str:
    return os.path.abspath(arg.partition("::")[0])


def sources(argv: list[str]) -> list[str]:
    """The target's sources: the leading arguments, up to the first option (the runner's and
    the inventory's command lines both begin with them)."""
    files = []
    for arg in argv:
        if arg.startswith("-"):
            break
        files.append(arg)
    return files


def fork_inventory(out: int, args: list[str], workdir: str) -> int:
    """Forks the inventory's process (`inventory`), which writes its record to descriptor `out`
    (this process's copy closes); returns its pid. It dies with the test process, whose end
    the runner judges first."""
    pid = os.fork()
    if pid:
        os.close(out)
        return pid
    code = 70
    try:
        lifetime.die_with_parent(signal.SIGKILL)
        process_env.export(inventory_env(os.environ, workdir))
        import tempfile

        tempfile.tempdir = None  # taken anew from TMPDIR
        log = os.open(os.path.join(workdir, "inventory.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        code = inventory(out, args)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def inventory(out: int, args: list[str]) -> int:
    """The inventory's process: collects `args`, records every case and definition to
    descriptor `out`, runs none.

    Its exit status means nothing; the record's existence says it collected.
    """
    import pytest

    from tools.runner.session import inventory as source_inventory
    from tools.runner.session import plugin

    recorder = source_inventory.recorder(
        out,
        [os.path.abspath(path) for path in sources(args)],  # as pytest's modules name them
        lambda item: plugin.placed(item).variant,
        plugin.not_applicable,
    )
    return int(pytest.main(args, plugins=[recorder]))


def main(argv: list[str]) -> int:
    if len(argv) >= 6 and argv[0] == SESSION and argv[2] == FORK_INVENTORY:
        ledger, out, workdir, inventory_args = int(argv[1]), int(argv[3]), argv[4], argv[5]
        inventory_args = json.loads(inventory_args)
        _preload(sources(inventory_args))
        pid = fork_inventory(out, inventory_args, workdir)
        code = session(ledger, argv[6:])
        os.waitpid(pid, 0)  # the runner reads what it wrote once this process has ended
        return code
    if len(argv) >= 2 and argv[0] == SESSION:
        return session(int(argv[1]), argv[2:])
    if len(argv) >= 2 and argv[0] == INVENTORY:
        return inventory(int(argv[1]), argv[2:])
    print(f"usage: {' '.join(COMMAND)} {SESSION}|{INVENTORY} FD PYTEST_ARGS...", file=sys.stderr)
    return 2


def exit_without_teardown(code: int) -> None:
    """Ends this process the way Python's own exit does, less the interpreter's teardown: waits
    for the non-daemon threads the tests left, runs the `atexit` handlers (the tests', torch's,
    logging's), flushes, then exits. The teardown frees every module's objects one by one and
    runs torch's C++ destructors: about a second of CPU per process with torch and dynamo
    loaded, more than all the runner adds to a small target (bench/runner_cost.py --shape tiny),
    for nothing a test can observe: the session has ended and its ledger says so."""
    import atexit
    import threading

    threading._shutdown()  # what Py_FinalizeEx does first: join the non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main(sys.argv[1:]))
