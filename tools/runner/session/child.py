"""The test process: pytest on the target's sources, or the inventory of them, run by the runner.

    python -m tools.runner.session.child --session LEDGER PYTEST_ARGS...
    python -m tools.runner.session.child --inventory OUT PYTEST_ARGS...

--session runs the tests, with the ledger (ledger.py), shard and node-id selection and the
thread budget as plugins; it dies with the runner, dumps every thread's stack on Bazel's
timeout SIGTERM, then interrupts the tests so the multi-process harness kills its ranks.
--inventory collects the sources apart from the tests' own configuration and runs nothing
(inventory.py). The runner (tools/runner/pytest_runner.py) judges what both leave behind.
"""

import faulthandler
import os
import signal
import sys
import time

from tools.hardware import envvars, variants
from tools.runner.process import descendants, gpu_peak, lifetime, process_env, read_audit
from tools.runner.session import collection_record, node_ids, threads
from tools.runner.session import ledger as ledger_plugin

COMMAND = [sys.executable, "-m", "tools.runner.session.child"]
SESSION, INVENTORY = "--session", "--inventory"
NO_TESTS = "no tests selected in this target (variant {variant}{filter}): check markers and filter"


def _install_sigterm_handler() -> None:
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


def session(ledger: str, args: list[str], env=os.environ) -> int:
    """The child: runs pytest on `args`, recording its progress in `ledger`."""
    read_audit.install(env)  # first: pytest's own start and conftests read files too
    descendants.export(env)  # the Python processes the tests start check themselves too
    import pytest

    from tools.runner.session import sharding

    lifetime.die_with_parent(signal.SIGTERM)
    faulthandler.enable()
    _install_sigterm_handler()
    selector = sharding.ShardSelector.from_env(env)
    # Before torch's import; cases with recorded seconds budget for the tests expected beside them.
    budget = threads.ThreadBudget.start(
        env, process_env.export, selector.durations, selector.recorded_seconds()
    )
    by_id = node_ids.NodeIdSelector.from_env(env)  # exact re-runs (the gate's)
    plugins = [selector, ledger_plugin.plugin(ledger, selector, by_id), budget]
    if by_id:
        plugins.append(by_id)
    if selector.total > 1:
        plugins.append(collection_record.recorder(collection_record.record_path(ledger)))
    code = pytest.main(args, plugins=plugins)
    gpu_peak.report_peak(descendants=env.get(envvars.DESCENDANT_PEAKS))
    return _exit_code(code, selector, env)


def _collection_record(ledger: str) -> str:
    """Where the test process records its collection (tools/runner/collection.py)."""
    return ledger + ".collection"


def inventory(out: str, args: list[str]) -> int:
    """The inventory's process: collects `args`, records every case and definition, runs none.

    Its exit status means nothing; the record's existence says it collected.
    """
    import pytest

    from tools.runner.session import inventory as source_inventory
    from tools.runner.session import plugin

    recorder = source_inventory.recorder(out, lambda item: plugin.requirements(item).variant)
    return int(pytest.main(args, plugins=[recorder]))


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == SESSION:
        return session(argv[1], argv[2:])
    if len(argv) >= 2 and argv[0] == INVENTORY:
        return inventory(argv[1], argv[2:])
    print(f"usage: {' '.join(COMMAND)} {SESSION}|{INVENTORY} PATH PYTEST_ARGS...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
