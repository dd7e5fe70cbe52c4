"""Main of every torch_test target: runs one test file under pytest, speaking Bazel's protocol.

    pytest_runner.py TEST_FILE [TEST_FILE...] [PYTEST_ARGS...]

Bazel test protocol (https://bazel.build/reference/test-encyclopedia):
  XML_OUTPUT_FILE              per-test-case JUnit XML, suite named after TEST_TARGET
  TEST_TOTAL_SHARDS/_INDEX     this shard's tests (tools/runner/sharding.py), from a collection
                               every shard checks it shares (PYTHONHASHSEED fixed, a second
                               collection beside the tests: tools/runner/collection.py);
  TEST_SHARD_STATUS_FILE       touched to say sharding is supported
  TESTBRIDGE_TEST_ONLY         --test_filter, a pytest -k expression that also applies with
                               the target's own -k (tools/runner/test_filter.py)
  TORCH_TEST_NODE_IDS          (--test_env) exact node ids to run (tools/runner/node_ids.py)
  TEST_TMPDIR                  HOME and pytest's basetemp (TMPDIR: a short dir in /tmp,
                               tools/runner/private_tmp.py); kernel caches are per user in
                               /tmp; bytecode is @pypi's, read-only (tools/runner/bytecode.py)
  TEST_UNDECLARED_OUTPUTS_DIR  rank logs of multi-process tests (test_utils.distributed)
  TEST_PREMATURE_EXIT_FILE     exists while tests run; a crash leaves it behind
  TEST_TIMEOUT                 becomes the deadline of harness timeouts (TORCH_TEST_DEADLINE)
Environment: the runner composes the test's environment in one place (`child_env`) from what
each part returns (directories, bytecode, deadline, GPU lease and probe). Only
tools/runner/process_env.py writes os.environ: there the child exports its thread budget, for
the ranks it starts.
Two processes: this one (the runner) sets up directories and the GPU lease, then runs pytest
in a child (`pytest_runner.py --session LEDGER ...`) and passes the target only if the child's
ledger proves every selected test reported a result (tools/runner/completion.py): a test that
ends the process early with status 0 fails the target. SIGTERM (Bazel's timeout) is forwarded
to the child, which dumps every thread's stack, then interrupts the tests so the multi-process
harness kills its ranks before the process exits.
Threads: the child budgets intra-op and inductor compile threads by the tests running on the
host (tools/runner/threads.py). GPUs: the runner leases them shared or whole as
tools/runner/gpu_share.py decides from the target's recorded peak GPU memory.

Outcomes: no test selected in the whole target fails; an empty shard of a non-empty target
passes; pytest's "no tests collected" (exit 5) never becomes a pass; hardware the variant needs
but the host lacks fails with a message (test_utils.pytest_plugin); an early exit fails.
Outside `bazel test` (e.g. `bazel run`), extra arguments go straight to pytest, except options
that keep tests from running (--collect-only, --setup-only, ...: tools/runner/refused_options.py).
"""

import contextlib
import faulthandler
import os
import pathlib
import resource
import signal
import sys
import time

from tools.hardware import envvars, probe, variants
from tools.runner import (
    bytecode,
    collection,
    completion,
    gpu_lease,
    gpu_peak,
    gpu_share,
    node_ids,
    private_tmp,
    process_env,
    refused_options,
    test_filter,
    threads,
)

NO_TESTS = "no tests selected in this target (variant {variant}{filter}): check markers and filter"
SESSION_FLAG = "--session"
COLLECTION_FLAG = "--collection-check"
SHARED_CACHE = f"/tmp/torch_tests_kernel_cache_{os.getuid()}"


def _configure_dirs(env, short: str) -> list[str]:
    args = []
    tmp = env.get("TEST_TMPDIR")
    if tmp:
        env["HOME"] = tmp
        args.append(f"--basetemp={tmp}/pytest")
        # TEST_TMPDIR is too long for AF_UNIX socket paths (108 bytes), which multiprocessing
        # and gloo create under TMPDIR.
        env["TMPDIR"] = short
    # Compiled kernels are shared by all tests of this user (not per sandbox): inductor and
    # triton key their caches by source, torch version and device, and write atomically.
    # Bytecode is read-only to tests (tools/runner/bytecode.py).
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", f"{SHARED_CACHE}/inductor")
    env.setdefault("TRITON_CACHE_DIR", f"{SHARED_CACHE}/triton")
    bytecode.configure(env, bytecode.precompiled_prefix(env))
    return args


def _protocol_args(env) -> list[str]:
    # xfail_strict: an unexpected pass is a failure in pytest's own report and JUnit too (the
    # plugin also fails one marked strict=False).
    args = ["-p", "test_utils.pytest_plugin", "-p", "no:cacheprovider", "-rfEX"]
    args += ["-o", "xfail_strict=true"]
    if env.get("XML_OUTPUT_FILE"):
        args += [
            f"--junitxml={env['XML_OUTPUT_FILE']}",
            "-o",
            f"junit_suite_name={env.get('TEST_TARGET', 'pytest')}",
            "-o",
            "junit_family=xunit1",
        ]
    args += test_filter.runner_args(env)  # composes with the target's own -k
    return args + ["--durations=5"]


def _install_sigterm_handler() -> None:
    # pytest captures fd 2 while a test runs; the dump must reach the real test log.
    log = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
    first_at = []

    def on_sigterm(signum, frame):
        if first_at:
            if time.monotonic() - first_at[0] < completion.SIGTERM_REPEAT_WINDOW_S:
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


def _report_resources(wall: float) -> None:
    """One line for bench/ scripts: wall, CPU and peak RSS of this process and its children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    print(
        f"torch_test resources: wall_s={wall:.1f} cpu_s={cpu:.1f} "
        f"peak_rss_mib={own.ru_maxrss / 1024:.0f} "
        f"children_peak_rss_mib={kids.ru_maxrss / 1024:.0f}",
        file=sys.stderr,
    )


def session(ledger: str, args: list[str], env=os.environ) -> int:
    """The child: runs pytest on `args`, recording its progress in `ledger`."""
    import pytest

    from tools.runner import sharding

    completion.die_with_parent()
    faulthandler.enable()
    _install_sigterm_handler()
    selector = sharding.ShardSelector.from_env(env)
    budget = threads.ThreadBudget.start(env, export=process_env.export)  # before torch's import
    plugins = [selector, completion.Ledger(ledger), budget]
    by_id = node_ids.NodeIdSelector.from_env(env)  # exact re-runs (the gate's)
    if by_id:
        plugins.append(by_id)
    if selector.total > 1:
        plugins.append(collection.recorder(_collection_record(ledger)))
    code = pytest.main(args, plugins=plugins)
    gpu_peak.report_peak()
    return _exit_code(code, selector, env)


def _collection_record(ledger: str) -> str:
    """Where the test process records its collection (tools/runner/collection.py)."""
    return ledger + ".collection"


def _collection_args(test_file: str, short: str, user_args: list[str]) -> list[str]:
    """The second collection's pytest arguments: the tests' own, without Bazel's outputs."""
    plugins = ["-p", "test_utils.pytest_plugin", "-p", "no:cacheprovider"]
    return [test_file, f"--basetemp={short}/collection_check", *plugins, *user_args]


def _run_checked(child: list[str], env, ledger: str, check_args: list[str], short: str) -> int:
    """Runs the tests; a sharded target also proves its collection stable (collection.py)."""
    if int(env.get("TEST_TOTAL_SHARDS", "1")) <= 1:
        return completion.run_session(child, env, ledger)
    check = collection.Check(os.path.abspath(__file__), COLLECTION_FLAG, check_args, env, short)
    try:
        result = completion.run_session(child, env, ledger)
        status, why = check.verdict(_collection_record(ledger))
    finally:
        check.cancel()
    if why:
        print(f"\ntorch_test: FAILED: {why}", file=sys.stderr)
    return result or status


@contextlib.contextmanager
def _gpus_for(variant: str, env, holder: str):
    """Holds the GPUs the variant needs (none for cpu) while the tests run; yields the
    environment the test needs to use them."""
    need = variants.gpus_needed(variant)
    if not need:
        yield {}
        return
    refused = variants.cannot_run(variant)
    if refused:
        raise gpu_lease.LeaseError(refused)
    deadline = float(env.get(envvars.DEADLINE, time.time() + 3600))
    asked = time.time()
    share = gpu_share.decide(env)
    with gpu_lease.lease(
        need,
        probe.visible_gpu_count(),
        timeout=max(1.0, deadline - time.time()),
        holder=holder,
        slots_per_gpu=share.slots_per_gpu,
        slots_each=share.slots_each,
        env=env,
    ) as held:
        waited = time.time() - asked
        how = "shared" if share.shared else "whole"
        print(
            f"torch_test lease: GPUs {held.gpus} after {waited:.1f} s ({how}: {share.reason})",
            file=sys.stderr,
        )
        yield {**held.env, **probe.exported_env()}


def deadline_env(env, started: float) -> dict[str, str]:
    """The one deadline of the test's harness timeouts, which use it as it is."""
    if not env.get("TEST_TIMEOUT"):
        return {}
    # Harness timeouts must fire before Bazel's: leave 10% (at least 15 s) for teardown.
    budget = float(env["TEST_TIMEOUT"])
    return {envvars.DEADLINE: str(started + budget - max(15.0, budget * 0.1))}


def run(argv: list[str], env=os.environ) -> int:
    if argv and argv[0] == SESSION_FLAG:
        return session(argv[1], argv[2:], env)
    if argv and argv[0] == COLLECTION_FLAG:
        return collection.collect(argv[1], argv[2:])
    if not argv:
        print("usage: pytest_runner.py TEST_FILE [PYTEST_ARGS...]", file=sys.stderr)
        return 2
    refused = refused_options.refused(argv[1:], env)
    if refused:
        print(refused_options.message(refused, argv[0]), file=sys.stderr)
        return 2
    started = time.time()
    # The test's environment: composed here, from what each part returns, and nowhere else.
    child_env = {**env, **deadline_env(env, started)}
    if env.get("TEST_SHARD_STATUS_FILE"):
        pathlib.Path(env["TEST_SHARD_STATUS_FILE"]).touch()
    premature = env.get("TEST_PREMATURE_EXIT_FILE")
    if premature:
        pathlib.Path(premature).touch()
    # Only the plugins we name: a host image's pytest plugins must not change what runs.
    child_env.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    child_env.update(collection.hash_seed_env(env))

    with private_tmp.private_tmp() as short:
        args = [argv[0], *_configure_dirs(child_env, short), *_protocol_args(env), *argv[1:]]
        ledger = os.path.join(short, "ledger")
        child = [sys.executable, os.path.abspath(__file__), SESSION_FLAG, ledger, *args]
        holder = env.get("TEST_TARGET", argv[0])
        check_args = _collection_args(argv[0], short, argv[1:])
        try:
            with _gpus_for(variants.current_variant(), child_env, holder) as gpu_env:
                child_env.update(gpu_env)
                result = _run_checked(child, child_env, ledger, check_args, short)
        except gpu_lease.LeaseError as error:
            print(f"GPU lease failed: {error}", file=sys.stderr)
            return 1
    _report_resources(time.time() - started)
    if premature:
        pathlib.Path(premature).unlink(missing_ok=True)
    return result


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
