"""Main of every torch_test target: the runner process, speaking Bazel's test protocol.

    pytest_runner.py TEST_FILE [TEST_FILE...] [PYTEST_ARGS...]

The runner is three kinds of process, each code in its own folder:
  this one (tools/runner/)       directories, the GPU lease, the deadline, the test process's
                                 environment (composed here, in `child_env`, and nowhere else);
                                 then the verdict: completion.py holds the tests' ledger
                                 against the source's inventory
  the test process and the       tools/runner/session/: `child.py --session` runs pytest with
  inventory's (session/)         the plugin (variant selection, outcome audit, declared
                                 expectations, torch's decorators as markers, call checks) and
                                 the ledger; `child.py --inventory` collects the sources apart
                                 from the target's conftest, args and ini file
  every test and rank process    tools/runner/process/: memory cap, GPU peak report, the one
  (process/)                     writer of os.environ, vec-ISA memo, parent-death signal

Bazel test protocol (https://bazel.build/reference/test-encyclopedia):
  XML_OUTPUT_FILE              per-test-case JUnit XML, suite named after TEST_TARGET
  TEST_TOTAL_SHARDS/_INDEX     this shard's tests (session/sharding.py), from a collection the
                               inventory proves stable (PYTHONHASHSEED fixed: collection.py)
  TEST_SHARD_STATUS_FILE       touched to say sharding is supported
  TESTBRIDGE_TEST_ONLY         --test_filter, a pytest -k expression that also applies with
                               the target's own -k (session/test_filter.py)
  TORCH_TEST_NODE_IDS          (--test_env) exact node ids to run (session/node_ids.py)
  TEST_TMPDIR                  HOME and pytest's basetemp (TMPDIR: a short dir in /tmp,
                               private_tmp.py); kernel caches are per user in /tmp; bytecode is
                               @pypi's, read-only (bytecode.py)
  TEST_UNDECLARED_OUTPUTS_DIR  rank logs of multi-process tests (test_utils.distributed)
  TEST_PREMATURE_EXIT_FILE     exists while tests run; a crash leaves it behind
  TEST_TIMEOUT                 becomes the deadline of harness timeouts (TORCH_TEST_DEADLINE)
  TEST_INFRASTRUCTURE_FAILURE_FILE  says why, when the GPUs the variant needs are missing or
                               not free in time: the host's or pool's failure, not the test's
SIGTERM (Bazel's timeout) is forwarded to the test process, which dumps every thread's stack,
then interrupts the tests so the multi-process harness kills its ranks before it exits. GPUs:
leased shared or whole as gpu_share.py decides from the target's recorded peak GPU memory.

Inputs: a test process (or rank) that opens a file of the source tree its target does not
declare fails the target, naming the file (process/read_audit.py).
Outcomes: the target passes only if pytest passed, its ledger shows every selected test
finished, and every case the inventory holds for this variant finished, went to another shard
or was left out by the user's own filter (completion.py); no test selected in the whole target
fails; an empty shard of a non-empty target passes; hardware the variant needs but the host
lacks fails with a message. Outside `bazel test` (e.g. `bazel run`), extra arguments go
straight to pytest, except options that keep tests from running (refused_options.py).
"""

import contextlib
import os
import pathlib
import resource
import sys
import time

from tools.hardware import envvars, probe, variants
from tools.runner import (
    bytecode,
    collection,
    completion,
    gpu_lease,
    gpu_share,
    private_tmp,
    refused_options,
    shared_caches,
)
from tools.runner.process import read_audit
from tools.runner.session import child, collection_record, test_filter


def _configure_dirs(env, short: str) -> list[str]:
    args = []
    tmp = env.get("TEST_TMPDIR")
    if tmp:
        env["HOME"] = tmp
        args.append(f"--basetemp={tmp}/pytest")
        # TEST_TMPDIR is too long for AF_UNIX socket paths (108 bytes), which multiprocessing
        # and gloo create under TMPDIR.
        env["TMPDIR"] = short
    # Compiled kernels are shared by all tests of this user, per torch build and compiler, in
    # folders only this user can use (tools/runner/shared_caches.py).
    # Bytecode is read-only to tests (tools/runner/bytecode.py).
    shared_caches.configure(env)
    bytecode.configure(env, bytecode.precompiled_prefix(env))
    return args


def _protocol_args(env) -> list[str]:
    # xfail_strict: an unexpected pass is a failure in pytest's own report and JUnit too (the
    # plugin also fails one marked strict=False).
    args = ["-p", "tools.runner.session.plugin", "-p", "no:cacheprovider", "-rfEX"]
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


def _test_files(argv: list[str]) -> list[str]:
    """The target's sources: the leading arguments, up to its first pytest option."""
    files = []
    for arg in argv:
        if arg.startswith("-"):
            break
        files.append(arg)
    return files


def _inventory_args(files: list[str], short: str) -> list[str]:
    """The inventory's pytest arguments: the sources alone, none of the target's options, no
    conftest, an empty ini file (pytest's default naming), only our plugin."""
    ini = os.path.join(short, "inventory.ini")
    with open(ini, "w") as f:
        f.write("[pytest]\n")
    return [
        *files,
        "--noconftest",
        "-c",
        ini,
        f"--rootdir={os.getcwd()}",
        f"--basetemp={short}/inventory",
        "-p",
        "tools.runner.session.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
    ]


def _run_checked(tests: list[str], env, ledger: str, check_args: list[str], short: str) -> int:
    """Runs the tests beside the source's inventory; the target passes only if every case the
    inventory holds for this variant ran or was left out on purpose (completion.account), and
    a sharded target's collection is stable (collection.py)."""
    check = collection.Check([*child.COMMAND, child.INVENTORY], check_args, env, short)
    try:
        result = completion.run_session(tests, env, ledger)
        found, why = check.inventory()
    finally:
        check.cancel()
    if found is None:
        problems = [] if result else [why]  # a failed collection: the tests' own output says why
    else:
        problems = completion.account(ledger, found, variants.current_variant())
        if int(env.get("TEST_TOTAL_SHARDS", "1")) > 1:
            status, unstable = check.stability(collection_record.record_path(ledger), found)
            problems += [unstable] if status else []
    if problems:
        shown = "\n  ".join(problems)
        print(f"\ntorch_test: FAILED: the source's inventory:\n  {shown}", file=sys.stderr)
    return result or (1 if problems else 0)


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
    wait = max(1.0, deadline - time.time())
    patience = share.patience(wait)
    with gpu_lease.lease(
        need,
        probe.visible_gpu_count(),
        timeout=wait,
        holder=holder,
        slots_per_gpu=share.slots_per_gpu,
        slots_each=share.slots_each,
        patience=patience,
        env=env,
    ) as held:
        waited = time.time() - asked
        how = "shared" if share.shared else "whole"
        # A long wait of a whole-GPU test is its patience, not a stuck lease (gpu_lease.py).
        patient = f"; let shared tests pass for up to {patience:.0f} s" if patience else ""
        print(
            f"torch_test lease: GPUs {held.gpus} after {waited:.1f} s "
            f"({how}: {share.reason}{patient})",
            file=sys.stderr,
        )
        yield {**held.env, **probe.exported_env()}


def _infrastructure_failure(env, message: str) -> None:
    """Tells Bazel the failure is the host's or pool's (no GPU visible, lease timed out)."""
    path = env.get("TEST_INFRASTRUCTURE_FAILURE_FILE")
    if path:
        pathlib.Path(path).write_text(message + "\n")


def deadline_env(env, started: float) -> dict[str, str]:
    """The one deadline of the test's harness timeouts, which use it as it is."""
    if not env.get("TEST_TIMEOUT"):
        return {}
    # Harness timeouts must fire before Bazel's: leave 10% (at least 15 s) for teardown.
    budget = float(env["TEST_TIMEOUT"])
    return {envvars.DEADLINE: str(started + budget - max(15.0, budget * 0.1))}


def run(argv: list[str], env=os.environ) -> int:
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
        # The runner's, whatever the test's environment says (process/read_audit.py).
        child_env[envvars.READ_AUDIT] = os.path.join(short, "undeclared_reads")
        tests = [*child.COMMAND, child.SESSION, ledger, *args]
        holder = env.get("TEST_TARGET", argv[0])
        check_args = _inventory_args(_test_files(argv), short)
        try:
            with _gpus_for(variants.current_variant(), child_env, holder) as gpu_env:
                child_env.update(gpu_env)
                result = _run_checked(tests, child_env, ledger, check_args, short)
            undeclared = read_audit.recorded(child_env[envvars.READ_AUDIT])
            if undeclared:
                print(f"\ntorch_test: FAILED: {read_audit.message(undeclared)}", file=sys.stderr)
                result = result or 1
        except gpu_lease.LeaseError as error:
            message = f"GPU lease failed: {error}"
            print(message, file=sys.stderr)
            _infrastructure_failure(env, message)
            return 1
    _report_resources(time.time() - started)
    if premature:
        pathlib.Path(premature).unlink(missing_ok=True)
    return result


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
