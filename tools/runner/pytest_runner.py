"""Main of every torch_test target: the runner process, speaking Bazel's test protocol.

    pytest_runner.py TEST_FILE [TEST_FILE...] [PYTEST_ARGS...]

The runner is three kinds of process, each code in its own folder:
  this one (tools/runner/)       directories, the GPU lease, the deadline, the test process's
                                 environment (composed here, in `child_env`, and nowhere else),
                                 the witness's socket; then the verdict (verdict.py) and the
                                 shard's record. What it decides for its processes goes into one
                                 runtime record (tools/hardware/spec.py), their one variable;
                                 the target's static facts come from the macro's spec,
                                 decoded once and handed to the policies it calls
  the test process and the       tools/runner/session/: `child.py --session` runs pytest with
  inventory's (session/)         the plugin (variant selection, outcome audit, declared
                                 expectations, torch's decorators as markers) and the ledger;
                                 `child.py --inventory` collects the sources (with their
                                 conftests) apart from the target's args and ini file
  every test and rank process    tools/runner/process/: the witness, memory cap, the one
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
  TEST_TIMEOUT                 becomes the deadline of harness timeouts (spec.Runtime)
  TEST_INFRASTRUCTURE_FAILURE_FILE  says why, when the GPUs the variant needs are missing or
                               not free in time: the host's or pool's failure, not the test's
SIGTERM (Bazel's timeout) is forwarded to the test process, which dumps every thread's stack,
then interrupts the tests so the multi-process harness kills its ranks before it exits. GPUs:
leased shared or whole as gpu_share.py decides from the target's recorded peak GPU memory.

Inputs: the runner and every process it starts see the source tree as the target's declared
inputs alone, a mount namespace of its own (source_view.py): an undeclared file is not there.
The test process and the inventory each start in a pid namespace and /proc of their own
(private_pids.py): no process outside the view, the runner included, is theirs to reach.
Outcomes: the runner judges every case the inventory holds for this variant by what its
witness saw the case do (witness.py here, process/witness.py in the test's processes;
verdict.py), whatever pytest reports; the target passes only where that judgement is green and
pytest's session ended with status 0 (completion.py). No test selected in the whole target
fails; an empty shard of a non-empty target passes; hardware the variant needs but the host
lacks fails with a message. The shard's typed record (tools/results/record.py) goes into
test.xml, also where the expectations file is refused (its one line, expectations.py) or the
runner itself raises (verdict failed, the exception's line). Outside `bazel test` (e.g. `bazel
run`), extra arguments go straight to pytest, except options that keep tests from running
(refused_options.py).
"""

import contextlib
import json
import os
import pathlib
import resource
import sys
import time

from tools.hardware import probe, spec, variants
from tools.results import record
from tools.runner import (
    bytecode,
    collection,
    completion,
    gpu_lease,
    gpu_share,
    gpu_watch,
    private_pids,
    private_tmp,
    refused_options,
    shared_caches,
    source_view,
    verdict,
    witness,
)
from tools.runner.process import events as witness_events
from tools.runner.session import child, expectations, test_filter
from tools.runner.session import inventory as source_inventory


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
    # A file that cannot be collected fails its own cases, not its pack's: the others run.
    args = ["-p", "tools.runner.session.plugin", "-p", "no:cacheprovider", "-rfEX"]
    args += ["--continue-on-collection-errors"]
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


def _resources(wall: float) -> record.Resources:
    """Wall, CPU and peak RSS of this process and its children (the record's, and one line
    for people)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    used = record.Resources(
        wall_s=round(wall, 1),
        cpu_s=round(cpu, 1),
        peak_rss_mib=round(own.ru_maxrss / 1024),
        children_peak_rss_mib=round(kids.ru_maxrss / 1024),
    )
    print(
        f"torch_test resources: wall {used.wall_s} s, CPU {used.cpu_s} s, peak RSS "
        f"{used.peak_rss_mib} MiB (children {used.children_peak_rss_mib} MiB)",
        file=sys.stderr,
    )
    return used


def _inventory_args(files: list[str], short: str, args: list[str]) -> list[str]:
    """The inventory's pytest arguments: the sources alone, none of the target's options but
    those that make cases (doctests), an empty ini file (pytest's default naming), our plugin
    and the conftests pytest finds from the runner's directory down to each source (what they
    generate is the source's: session/inventory.py)."""
    ini = os.path.join(short, "inventory.ini")
    with open(ini, "w") as f:
        f.write("[pytest]\n")
    return [
        *files,
        *source_inventory.case_making_options(args),
        "-c",
        ini,
        f"--rootdir={os.getcwd()}",
        f"--confcutdir={os.getcwd()}",
        f"--basetemp={short}/inventory",
        "-p",
        "tools.runner.session.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
    ]


# The test process and the inventory, each in a pid namespace and /proc of its own.
_COMMAND = [*private_pids.PREFIX, *child.COMMAND]


def _run_checked(
    args: list[str],
    env,
    check_args: list[str],
    short: str,
    seen: witness.Witness,
    target: spec.Spec,
) -> tuple[int, record.ShardRecord]:
    """Runs the tests beside the source's inventory, then judges every case the inventory holds
    for this variant by what the witness saw it do (verdict.py); a sharded target's collection
    must be stable (collection.py). The target passes only where pytest's session ended with
    status 0 and every case is green in the runner's own eyes."""
    # An unsharded target's test process forks the inventory (one torch import for both); a
    # sharded one's is a process of its own, with another hash seed (collection.py).
    sharded = int(env.get("TEST_TOTAL_SHARDS", "1")) > 1
    check = collection.Check(
        [*_COMMAND, child.INVENTORY], check_args, env, short, forked=not sharded
    )
    ledger = witness.Stream()  # the test process's ledger (session/ledger.py), as it writes it
    streams = [ledger] if sharded else [ledger, check.out]
    fork = [child.FORK_INVENTORY, str(check.out.fd), short, json.dumps(check_args)]
    tests = [*_COMMAND, child.SESSION, str(ledger.fd), *([] if sharded else fork), *args]
    try:
        result, done = completion.run_session(tests, env, ledger, streams)
        found, why = check.inventory()
    finally:
        check.cancel()
    events = seen.events()
    variant = target.variant
    try:
        entries, refused = _declared(target, variant), None
    except expectations.ExpectationError as error:
        entries, refused = [], str(error)
    if found is None or refused:
        rec = record.ShardRecord()
        # A failed collection: the tests' own output says why; a refused file: its line, below.
        rec.problems = [] if result or refused else [why]
    else:
        try:
            rec = verdict.shard_record(found, done.excused, events, entries, variant, os.getcwd())
        except expectations.ExpectationError as error:  # a test two entries name, say
            rec, refused = record.ShardRecord(), str(error)
        else:
            rec.problems += _plugin_problems(events, done)
        rec.expectations = target.expectations
        if sharded:
            status, unstable = check.stability(done.collection, found)
            rec.problems += [unstable] if status else []
    # A file the runner cannot read as declared: its one line (the session's too) fails it.
    rec.problems += [refused] if refused else []
    # The test running when Bazel's timeout interrupted the session, and its thread's stack.
    said = done.interrupted if isinstance(done.interrupted, dict) else {}
    rec.interrupted, rec.interrupted_stack = said.get("running") or None, said.get("stack")
    problems = verdict.problems(rec)
    if problems:
        shown = "\n  ".join(problems)
        print(f"\ntorch_test: FAILED: what the runner saw:\n  {shown}", file=sys.stderr)
    status = result or (1 if problems else 0)
    rec.verdict = record.PASSED if status == 0 else record.FAILED
    return status, rec


def _declared(target: spec.Spec, variant: str) -> list:
    """The target's declared outcomes for this variant and torch release; ExpectationError (one
    line) where its file is refused."""
    source = target.expectations
    if not source:
        return []
    declared = target.declared_variants or list(variants.VARIANTS)
    return expectations.read(source, declared, variant, target.cached)


def _plugin_problems(events: list[dict], done: completion.Record) -> list[str]:
    """Our pytest plugin places each case in its variant and judges skips: a session that ran
    without it (disabled through an ini file's addopts or a conftest's unregister; `-p no:` and
    `-o addopts` are refused: refused_options.py) proves nothing."""
    said = {ev["what"] for ev in events if ev.get("e") == witness_events.PLUGIN}
    missing = [what for what in ("configured", "placed") if what not in said]
    if not missing or (not done.selected and "configured" in said):
        return []
    return [
        f"the runner's pytest plugin ({refused_options.REQUIRED_PLUGINS[0]}) never "
        f"{' or '.join(missing)} the tests: something switched it off (an ini file's addopts "
        "or a conftest)"
    ]


@contextlib.contextmanager
def _gpus_for(
    target: spec.Spec, deadline: float | None, env, holder: str, leased: list, watches: list
):
    """Holds the GPUs the target's variant needs (none for cpu) while the tests run and watches
    their memory from outside the test (gpu_watch.py); yields the environment the test needs to
    see them and the runtime record's GPU fields, and appends the lease's record to `leased`,
    the watch to `watches`."""
    need = variants.gpus_needed(target.variant)
    if not need:
        yield {}, {}
        return
    refused = variants.cannot_run(target.variant)
    if refused:
        raise gpu_lease.LeaseError(refused)
    asked = time.time()
    share = gpu_share.decide(target, env)
    wait = max(1.0, (deadline or asked + 3600) - time.time())
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
        leased.append(
            record.Lease(
                gpus=list(held.gpus),
                wait_s=round(waited, 1),
                shared=share.shared,
                reason=share.reason,
                share=share.fraction,
            )
        )
        how = "shared" if share.shared else "whole"
        # A long wait of a whole-GPU test is its patience, not a stuck lease (gpu_lease.py).
        patient = f"; let shared tests pass for up to {patience:.0f} s" if patience else ""
        print(
            f"torch_test lease: GPUs {held.gpus} after {waited:.1f} s "
            f"({how}: {share.reason}{patient})",
            file=sys.stderr,
        )
        with gpu_watch.watch(held.gpus, whole=not share.shared) as watched:
            watches.append(watched)  # its peak is set when the block ends
            gpu_facts = {
                "gpu_memory_fraction": share.memory_fraction,
                "host_gpus": probe.host_gpu_count(),  # asked once, for every process below
            }
            yield held.env, gpu_facts
        print(
            f"torch_test gpu memory: peak {watched.peak_mib} MiB per GPU ({watched.how})",
            file=sys.stderr,
        )


def _infrastructure_failure(env, message: str) -> None:
    """Tells Bazel the failure is the host's or pool's (no GPU visible, lease timed out)."""
    path = env.get("TEST_INFRASTRUCTURE_FAILURE_FILE")
    if path:
        pathlib.Path(path).write_text(message + "\n")


def deadline(env, started: float) -> float | None:
    """The one deadline of the test's harness timeouts, which use it as it is."""
    if not env.get("TEST_TIMEOUT"):
        return None
    # Harness timeouts must fire before Bazel's: leave 10% (at least 15 s) for teardown.
    budget = float(env["TEST_TIMEOUT"])
    return started + budget - max(15.0, budget * 0.1)


def run(argv: list[str], env=os.environ) -> int:
    try:
        return _run(argv, env)
    except Exception as error:  # the runner's own failure: still a record, then the traceback
        if env.get("XML_OUTPUT_FILE"):
            why = f"the runner failed: {type(error).__name__}: {error}".splitlines()[0]
            crashed = record.ShardRecord(verdict=record.FAILED, problems=[why])
            record.write(env["XML_OUTPUT_FILE"], crashed, env.get("TEST_TARGET", "pytest"))
        raise


def _run(argv: list[str], env) -> int:
    if not argv:
        print("usage: pytest_runner.py TEST_FILE [PYTEST_ARGS...]", file=sys.stderr)
        return 2
    refused = refused_options.refused(argv[1:], env)
    if refused:
        print(refused_options.message(refused, argv[0]), file=sys.stderr)
        return 2
    started = time.time()
    # Before any process or thread starts: from here on the source tree holds only the
    # target's declared inputs, for this process and every process it starts (source_view.py).
    try:
        source_view.enter(env)
    except source_view.SourceViewError as error:
        print(f"torch_test: FAILED: {error}", file=sys.stderr)
        return 1
    # The test's environment: composed here, from what each part returns, and nowhere else.
    child_env = dict(env)
    target = spec.spec(env)
    due = deadline(env, started)
    if env.get("TEST_SHARD_STATUS_FILE"):
        pathlib.Path(env["TEST_SHARD_STATUS_FILE"]).touch()
    premature = env.get("TEST_PREMATURE_EXIT_FILE")
    if premature:
        pathlib.Path(premature).touch()
    # Only the plugins we name: a host image's pytest plugins must not change what runs.
    child_env.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    child_env.update(collection.hash_seed_env(env))

    with private_tmp.private_tmp() as short:
        # The sources first, as the inventory takes them (child.sources), then the options.
        leading = child.sources(argv)
        runner_args = [*_configure_dirs(child_env, short), *_protocol_args(env)]
        args = [*leading, *runner_args, *argv[len(leading) :]]
        seen = witness.Witness(short)  # bound before any test process starts
        holder = env.get("TEST_TARGET", argv[0])
        check_args = _inventory_args(leading, short, argv[1:])
        leased: list[record.Lease] = []
        watches: list[gpu_watch.Watched] = []
        try:
            with _gpus_for(target, due, env, holder, leased, watches) as (gpu_env, gpu_facts):
                child_env.update(gpu_env)
                facts = spec.Runtime(deadline=due, witness=seen.address, **gpu_facts)
                child_env.update(facts.env())
                result, rec = _run_checked(args, child_env, check_args, short, seen, target)
        except gpu_lease.LeaseError as error:
            message = f"GPU lease failed: {error}"
            print(message, file=sys.stderr)
            _infrastructure_failure(env, message)
            # The record says so too: its readers (the gate) tell the host's failure from torch's.
            if env.get("XML_OUTPUT_FILE"):
                refused = record.ShardRecord(problems=[message], infrastructure=str(error))
                record.write(env["XML_OUTPUT_FILE"], refused, env.get("TEST_TARGET", "pytest"))
            return 1
    rec.lease = leased[0] if leased else None
    rec.gpu_peak_mib = watches[0].peak_mib if watches else None
    rec.verdict = record.PASSED if result == 0 else record.FAILED
    rec.resources = _resources(time.time() - started)
    if env.get("XML_OUTPUT_FILE"):
        record.write(env["XML_OUTPUT_FILE"], rec, env.get("TEST_TARGET", "pytest"))
    if premature:
        pathlib.Path(premature).unlink(missing_ok=True)
    return result


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
