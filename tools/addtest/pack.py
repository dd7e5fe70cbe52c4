"""How `add_test DIR` arranges a directory's files into targets: one each, or packed.

Every target pays a fixed cost whatever it runs: Bazel's action, the runner, the source's
inventory and the test process, the last two importing torch (PACKING["overhead_s"]). A file
whose cases cost several times that gets a target of its own: the overhead is a small part of
it, and it keeps per-file caching and isolation. Cheaper files share targets (torch_test
`srcs`), so the overhead is paid once per pack as pytest-xdist pays it once per worker. A pack
holds files in name order up to the cost of a file that runs alone, so packs and lone files are
of a size and Bazel spreads them over the cores as `pytest -n` spreads files.

A file's cost is what add_test measured of its cpu cases, scaled to all its cases by their count
(cases of the GPU variants do not run where add_test measures). Files are packed only with
files of the same variants and features: a pack's targets are the variants of its files. A
file whose measured run did not end normally (pytest's INTERNALERROR) runs alone: in a pack, the
process it ends would take the other files' cases with it. One that runs only with pytest
arguments of its own runs alone too (stanza.runs_alone).
"""

import dataclasses

# The rule's numbers, in one place. overhead_s: one more target's CPU seconds with torch (the
# runner with one case: bench/results/scale_2026-11-26_cpu.md), Bazel's action included.
# alone_factor: a file costing at least this many overheads runs alone (its overhead then at
# most a quarter of it); a pack is filled up to the same cost. keep_within: a re-run keeps a
# target's files together while their measured cost moved by at most this part of what it was
# (a measurement's noise re-arranges no target; keeps()).
# timeout_margin: a target's Bazel timeout is at least this many times its measured cost (it
# was measured alone; under `bazel test //...` it runs beside others on a loaded host).
PACKING = {"overhead_s": 4.0, "alone_factor": 4, "keep_within": 0.5, "timeout_margin": 2}
# Bazel's timeout of each test size, seconds (the test encyclopedia), torch_test's default first.
SIZES = (("medium", 300), ("large", 900), ("enormous", 3600))


def size_for(cost_s: float) -> str | None:
    """The smallest test size whose timeout the margin allows a target of this measured cost;
    None for torch_test's default (also where none is enough: the user shards it)."""
    for size, timeout_s in SIZES:
        if cost_s * PACKING["timeout_margin"] <= timeout_s:
            return None if size == SIZES[0][0] else size
    return SIZES[-1][0]


def size_line(size: str, cost_s: float) -> str:
    """What add_test says of a size it proposes, and why."""
    default, default_s = SIZES[0]
    return (
        f'size = "{size}": its cases took {cost_s:.0f} s where add_test measured them, and '
        f"{default}'s {default_s} s timeout is under {PACKING['timeout_margin']} times that"
    )


def cpu_tags(ranks: int) -> list[str]:
    """The tags of a target whose widest case runs `ranks` processes at once: `cpu:N`, so Bazel
    holds N of the host's cores while it runs, and runs it alone on a host of fewer. Ranks that
    share the cores with other targets stretch past torch's own per-case timeout (300 s)
    however large the Bazel size. No tag for a case of one process (Bazel's default, 1 core)."""
    return [f"cpu:{ranks}"] if ranks > 1 else []


def cpu_line(ranks: int) -> str:
    """What add_test says of the cpu tag it writes, and why."""
    return (
        f'tags = ["cpu:{ranks}"]: a case runs {ranks} rank processes at once; Bazel holds '
        f"as many cores while it runs (all of them, alone, on a host of fewer)"
    )


def cpu_cases(placed: dict[str, list]) -> int:
    """How many of a file's cases ({case: [variant, features]}) run where add_test measures."""
    return sum(1 for p in placed.values() if p[0] == "cpu")


def alone_at() -> float:
    """The measured cost (seconds) from which a file gets a target of its own."""
    return PACKING["overhead_s"] * PACKING["alone_factor"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One file as add_test measured it."""

    name: str  # the file's name in the directory
    seconds: float  # what its cpu cases took, every phase
    ran: int  # how many cases ran (the cpu variant's)
    cases: int  # how many it has, every variant's
    kind: tuple  # (variants, features) of its stanza: only files of one kind share a target
    alone: bool = False  # it needs a target of its own whatever it costs (stanza.runs_alone)

    @property
    def cost(self) -> float:
        if self.ran == 0:
            return alone_at() if self.cases else 0.0  # nothing measured: as a lone file's
        return self.seconds * self.cases / self.ran


def plan(files: list[Measured], fixed: list[list[str]] = ()) -> list[list[str]]:
    """The targets' files: one list per target, a one-file list a target of its own. `fixed`:
    groups a person owns (kept as they are; their files are not planned again)."""
    taken = {name for group in fixed for name in group}
    groups = [list(g) for g in fixed]
    open_packs: dict[tuple, list[tuple[list[str], float]]] = {}
    for f in sorted(files, key=lambda m: m.name):
        if f.name in taken:
            continue
        if f.cost >= alone_at() or f.alone:  # e.g. a crash would end its pack's other files
            groups.append([f.name])
            continue
        packs = open_packs.setdefault(f.kind, [])
        if packs and packs[-1][1] + f.cost <= alone_at():
            names, cost = packs[-1]
            names.append(f.name)
            packs[-1] = (names, cost + f.cost)
        else:
            packs.append(([f.name], f.cost))
    groups += [names for packs in open_packs.values() for names, _ in packs]
    return sorted(groups, key=lambda g: g[0])


def keeps(before: list[Measured], now: list[Measured]) -> bool:
    """Whether a re-run keeps a target's files as they were: the same files, still of one
    kind, none of a pack now needing a target of its own, and their cost moved by at most
    PACKING["keep_within"] of what it was."""
    if sorted(m.name for m in before) != sorted(m.name for m in now):
        return False
    if len({m.kind for m in now}) != 1 or len(now) > 1 and any(m.alone for m in now):
        return False
    old, new = sum(m.cost for m in before), sum(m.cost for m in now)
    return abs(new - old) <= PACKING["keep_within"] * old


def pack_name(group: list[str]) -> str:
    """A pack's target name: its first file's, marked as a pack."""
    return "packed_" + group[0].removesuffix(".py")
