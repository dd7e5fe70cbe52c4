"""Which hardware variants a gate compares: those both sides can run on their hosts' GPUs.

    plan = variant_plan.plan(baseline_facts, candidate_facts, {"cpu": 0, "gpu": 1, ...})
    plan.compared        # ["cpu", "gpu"]
    plan.not_compared    # {"multi_gpu": "candidate saved run's host has 1 GPU; multi_gpu needs 2"}
    plan.env["baseline"] # what that side's `tools/bazel` gets so that it runs no more than that

A side can use a host's GPUs when its torch is a CUDA build that sees them (a lock's torch is
taken for a CPU build, as tools/platforms/host_hardware.bzl takes it). A variant of N GPUs is
compared only when both sides can use N; a variant one side cannot run is run by neither live
side (nothing to compare it with), and its targets' results from a saved run are left out of
the comparison: a GPU variant that ran on one side only is never counted as compared, as a
regression or as a pass. Pure: the facts are gathered by tools/gate/sides.py.
"""

import dataclasses

from tools.hardware import envvars
from tools.results import bep


@dataclasses.dataclass(frozen=True)
class SideFacts:
    role: str  # "baseline" or "candidate"
    torch: str | None  # its torch's version
    cuda: bool  # its torch can use CUDA GPUs (a lock's: no)
    gpus: int  # GPUs of the host it runs on (a saved run: the host it ran on)
    saved: bool = False  # a saved run: its results are what they are, nothing runs

    @property
    def usable(self) -> int:
        return self.gpus if self.cuda else 0


@dataclasses.dataclass(frozen=True)
class Plan:
    compared: list  # variant names, in the table's order
    not_compared: dict  # variant -> why
    env: dict  # role -> {variable: value} for that live side's `tools/bazel`


def _plural(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _short_of(side: SideFacts, variant: str, needs: int) -> str:
    """Why `side` cannot run `variant` of `needs` GPUs (it cannot); a reason about the host alone
    does not name the side."""
    host = "its saved run's host" if side.saved else "this host"
    if not side.gpus:
        return f"{host} has no GPUs"
    if not side.cuda:
        return f"{side.role} torch {side.torch} cannot use {host}'s {_plural(side.gpus)}"
    return f"{host} has {_plural(side.gpus)}, {variant} needs {needs}"


def plan(baseline: SideFacts, candidate: SideFacts, variants: dict) -> Plan:
    """`variants`: {name: GPUs it needs}, in the table's order."""
    limit = min(baseline.usable, candidate.usable)
    compared, not_compared = [], {}
    for name, needs in variants.items():
        if needs <= limit:
            compared.append(name)
            continue
        short = {
            s.role: _short_of(s, name, needs) for s in (baseline, candidate) if s.usable < needs
        }
        reasons = list(dict.fromkeys(short.values()))  # two live sides share one host
        if len(reasons) < len(short) and reasons[0].startswith("this host"):
            not_compared[name] = reasons[0]
            continue
        not_compared[name] = "; ".join(
            why if why.startswith(role) else f"{role}: {why}" for role, why in short.items()
        )
    env = {}
    for side in (baseline, candidate):
        env[side.role] = {}
        if side.saved or not side.gpus:
            continue  # a CPU host offers no GPU variant: as without the gate
        if not side.cuda:
            # The GPU-host check (host_hardware.bzl) stops a torch that cannot use the GPUs;
            # this asks for the CPU variants instead, as `--config=cpu` does.
            env[side.role][envvars.CPU_ONLY] = "1"
        elif limit < side.gpus:
            # GPUs this side could use but the other cannot: offer only as many as both can.
            env[side.role][envvars.GPUS] = str(limit)
    return Plan(compared, not_compared, env)


def variant_of(tags, table: dict) -> str:
    """The variant a target's tags name: the one with the most of its tags among them (a
    target outside torch_test has none of them: cpu)."""
    tags = set(tags)
    fits = [name for name, spec in table.items() if set(spec["tags"]) <= tags]
    return max(fits, key=lambda name: len(table[name]["tags"]))


def left_out(baseline: dict, candidate: dict, plan: Plan, table: dict) -> dict:
    """{label: variant} of the targets (bep.Target by label, per side) whose variant the plan
    does not compare, unless SKIPPED on both sides (they ran on neither: compare.py says so)."""
    out = {}
    for label in sorted(baseline.keys() | candidate.keys()):
        ran = [t for t in (baseline.get(label), candidate.get(label)) if t is not None]
        variant = variant_of(ran[0].tags, table)
        skipped = all(t.status == bep.SKIPPED for t in ran) and len(ran) == 2
        if variant not in plan.compared and not skipped:
            out[label] = variant
    return out
