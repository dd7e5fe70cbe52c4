"""One stable collection for every shard: a fixed hash seed, and a check that it is enough.

Bazel's shards are separate processes, maybe on separate hosts, with no channel to each other;
each collects the file itself and keeps its part (tools/runner/sharding.py). That partitions
the tests only if every shard collects the same ids meaning the same cases. pytest names
parameters it cannot print by position (`case0`, `case1`, ...): over a set, the position of a
case depends on the process's string hash seed, so two shards could each run `case0` as a
different case, one case twice and another never.

* `hash_seed_env`: test processes get PYTHONHASHSEED=0 unless the user set one
  (`--test_env=PYTHONHASHSEED=...`). The runner sets it, not torch_test's env: the runner sees
  a user's value and keeps it, under `bazel test`, `bazel run` and on remote workers alike.
* A fixed seed alone does not make ids mean one thing: object hashes and reprs follow memory
  addresses, values may come from a random generator or the host. So each shard of a sharded
  target proves it: the runner collects the file a second time, in a child with another hash
  seed, concurrently with the tests, and compares node id -> parameter reprs with what the test
  process collected (`recorder`, before any selection). A difference fails the shard, naming
  it: if two processes on one host disagree, shards elsewhere can too. Unsharded targets skip
  it: one process's collection is trivially the one it runs. Cost: one more collection (the
  test module's imports) per shard, in parallel with the tests (bench/collection_check_cost.sh).
"""

import json
import os
import re
import subprocess
import sys

SEED_ENV = "PYTHONHASHSEED"
DEFAULT_SEED = "0"
# Reprs that differ between processes only by where an object lives.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_REPR_LIMIT = 300
_SHOWN = 10


def hash_seed_env(env) -> dict:
    """The environment entries the runner adds: a fixed hash seed, unless one is set."""
    return {} if SEED_ENV in env else {SEED_ENV: DEFAULT_SEED}


def other_seed(seed: str) -> str:
    return "1" if seed != "1" else "2"


def _stable_repr(value) -> str:
    return _ADDRESS.sub("0x?", repr(value))[:_REPR_LIMIT]


def describe(items) -> dict[str, dict[str, str]]:
    """node id -> {parameter: repr} of collected items (empty for unparametrized ones)."""
    described = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec else {}
        described[item.nodeid] = {k: _stable_repr(v) for k, v in sorted(params.items())}
    return described


def recorder(path: str, run_nothing: bool = False):
    """pytest plugin: writes what was collected, before any selection (variant, -k, shard).

    A hook wrapper, so it sees the items before every plugin's selection, whatever their order;
    with `run_nothing` it then empties the selection (the check's child: not --collect-only,
    which the runner refuses for tests, and which prints every id).
    """
    import pytest  # not at import: the runner's parent process never loads pytest

    class Recorder:
        @pytest.hookimpl(wrapper=True)
        def pytest_collection_modifyitems(self, items):
            with open(path + ".tmp", "w") as f:
                json.dump(describe(items), f)
            os.replace(path + ".tmp", path)
            result = yield
            if run_nothing:
                items[:] = []
            return result

    return Recorder()


def differences(ours: dict, theirs: dict) -> list[str]:
    """Readable lines for every id that one collection lacks or the two describe differently."""
    lines = [f"only with this shard's seed: {n}" for n in sorted(ours.keys() - theirs.keys())]
    lines += [f"only with the other seed: {n}" for n in sorted(theirs.keys() - ours.keys())]
    for node in sorted(ours.keys() & theirs.keys()):
        if ours[node] != theirs[node]:
            lines.append(f"{node} is {ours[node]} here, {theirs[node]} with the other seed")
    return lines


def collect(out: str, args: list[str]) -> int:
    """The check's child: collects `args` as the test process does, records it, runs nothing.

    Its exit status means nothing (no test selected); the record's existence says it collected.
    """
    import pytest

    return int(pytest.main(args, plugins=[recorder(out, run_nothing=True)]))


class Check:
    """The second collection of a sharded target, started beside the tests."""

    def __init__(self, runner: str, flag: str, args: list[str], env, workdir: str):
        self.seed = env.get(SEED_ENV, DEFAULT_SEED)
        self.other = other_seed(self.seed)
        self.out = os.path.join(workdir, "collection.check")
        self.log = os.path.join(workdir, "collection.check.log")
        child_env = {**env, SEED_ENV: self.other}
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, runner, flag, self.out, *args],
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def verdict(self, recorded: str) -> tuple[int, str]:
        """0 and "" when the tests' collection (in `recorded`) matches the second one."""
        self.proc.wait()
        if not os.path.exists(recorded):
            return 0, ""  # the tests never collected: their own failure says why
        if not os.path.exists(self.out):
            with open(self.log) as f:
                tail = f.read()[-3000:]
            return 1, f"the second collection (PYTHONHASHSEED={self.other}) failed:\n{tail}"
        with open(recorded) as f, open(self.out) as g:
            lines = differences(json.load(f), json.load(g))
        if not lines:
            return 0, ""
        shown = "\n  ".join(lines[:_SHOWN]) + ("\n  ..." if len(lines) > _SHOWN else "")
        return 1, (
            f"this target's collection differs between two processes (PYTHONHASHSEED="
            f"{self.seed} and {self.other}), so its shards may not partition one collection "
            f"(a case run twice, another never); give such parameters ids "
            f"(pytest.param(..., id=...)) or an order (a list, sorted()):\n  {shown}"
        )
