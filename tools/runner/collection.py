"""The source's inventory beside the tests, and one stable collection for every shard.

Every target starts one more process beside its tests (`Check`): the inventory
(tools/runner/session/inventory.py), which collects the source with its conftests but without
the target's args, ini file or other plugins and records every case, its variant and its
parameters, and every test-named definition that yields no case. The runner holds the tests'
ledger against it (tools/runner/verdict.py).

Bazel's shards are separate processes, maybe on separate hosts, with no channel to each other;
each collects the file itself and keeps its part (tools/runner/session/sharding.py). That
partitions the tests only if every shard collects the same ids meaning the same cases. pytest
names parameters it cannot print by position (`case0`, `case1`, ...): over a set, the position
of a case depends on the process's string hash seed, so two shards could each run `case0` as a
different case, one case twice and another never.

* `hash_seed_env`: test processes get PYTHONHASHSEED=0 unless the user set one
  (`--test_env=PYTHONHASHSEED=...`). The runner sets it, not torch_test's env: the runner sees
  a user's value and keeps it, under `bazel test`, `bazel run` and on remote workers alike.
* A fixed seed alone does not make ids mean one thing: object hashes and reprs follow memory
  addresses, values may come from a random generator, the host or the process's temporary
  directory. So the inventory runs with another hash seed, another TMPDIR and no shard's
  index (child.inventory_env: every shard's inventory is one collection), and each shard of a
  sharded target compares case -> parameter reprs of what its test process collected
  (`recorder`, before any selection) with the inventory's: a case whose parameters differ, or
  that only the test process collected (a conftest reading TEST_SHARD_INDEX: the shard would
  give it to one that never collects it), fails the shard, naming it: if two processes on one
  host disagree, shards elsewhere can too. A case only the inventory holds is never run here
  (tools/runner/verdict.py). Cost: one more
  collection per target (the test module's imports), in parallel with the tests
  (bench/inventory_cost.sh).
"""

import os
import subprocess

from tools.runner import witness
from tools.runner.session import child
from tools.runner.session import inventory as source_inventory

SEED_ENV = "PYTHONHASHSEED"
DEFAULT_SEED = "0"
_SHOWN = 10


def hash_seed_env(env) -> dict:
    """The environment entries the runner adds: a fixed hash seed, unless one is set."""
    return {} if SEED_ENV in env else {SEED_ENV: DEFAULT_SEED}


def other_seed(seed: str) -> str:
    return "1" if seed != "1" else "2"


def differences(ours: dict, theirs: dict) -> list[str]:
    """Readable lines for every id that one collection lacks or the two describe differently."""
    lines = [f"only with this shard's seed: {n}" for n in sorted(ours.keys() - theirs.keys())]
    lines += [f"only with the other seed: {n}" for n in sorted(theirs.keys() - ours.keys())]
    for node in sorted(ours.keys() & theirs.keys()):
        if ours[node] != theirs[node]:
            lines.append(f"{node} is {ours[node]} here, {theirs[node]} with the other seed")
    return lines


class Check:
    """The inventory of a target's source: collected in a process the runner starts beside the
    tests with another hash seed (a sharded target), or forked by the test process before it
    loads anything of the target's (`forked`: one torch import for both, session/child.py)."""

    def __init__(self, command: list[str], args: list[str], env, workdir: str, forked=False):
        self.seed = env.get(SEED_ENV, DEFAULT_SEED)
        self.other = self.seed if forked else other_seed(self.seed)
        self.out = witness.Stream()  # its record, as it writes it (a forked one's: `out.fd`)
        self.log = os.path.join(workdir, "inventory.log")
        self.args = args
        self.proc = None
        if forked:
            return
        # The same environment as a forked inventory's (child.inventory_env), another seed.
        changed = {**child.inventory_env(env, workdir), SEED_ENV: self.other}
        child_env = {k: v for k, v in {**env, **changed}.items() if v is not None}
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [*command, str(self.out.fd), *args],
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[self.out.fd],
            )
        self.out.given()

    def cancel(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def inventory(self) -> tuple[source_inventory.Inventory | None, str]:
        """The inventory, or None and why it could not be taken (a forked one: once the test
        process has ended)."""
        if self.proc is not None:
            self.proc.wait()
        try:
            return source_inventory.Inventory.from_json(self.out.text()), ""
        except ValueError:  # none, or cut short: it never finished
            tail = ""
            if os.path.exists(self.log):
                with open(self.log) as f:
                    tail = f.read()[-3000:]
            return None, f"the inventory of the source (collected beside the tests) failed:\n{tail}"

    def stability(self, ours: dict | None, found: source_inventory.Inventory) -> tuple[int, str]:
        """0 and "" when the tests' collection (`ours`, as their ledger says) means what the
        inventory's does."""
        if ours is None:
            return 0, ""  # the tests never collected: their own failure says why
        # What only the inventory holds is the verdict's (never ran); what only this shard's
        # process collected, the other shards may never collect, so none would run it.
        theirs = {case: info.params for case, info in found.items.items() if case in ours}
        lines = differences(ours, theirs)
        if not lines:
            return 0, ""
        shown = "\n  ".join(lines[:_SHOWN]) + ("\n  ..." if len(lines) > _SHOWN else "")
        return 1, (
            f"this target's collection differs between two processes (PYTHONHASHSEED="
            f"{self.seed} and {self.other}, the second without the shard's index), so its "
            f"shards may not partition one collection (a case run twice, another never); give "
            f"such parameters ids "
            f"(pytest.param(..., id=...)) or an order (a list, sorted()):\n  {shown}"
        )
