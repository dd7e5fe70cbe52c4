"""add_test for one file: the printed report (the stanza, the cases per variant, the measured
outcomes as expectations entries to review) and its exit status. Usage: tools/add_test.py."""

import pathlib

from tools.addtest import deps as deps_of
from tools.addtest import measure, pack, stanza
from tools.addtest.environment import ROOT, Environment, tests_environment
from tools.hardware import probe, variants


def placement(placed: dict[str, list]) -> str:
    """Per variant, the cases that land there."""
    lines = []
    for variant in variants.VARIANTS:
        ids = sorted(n for n, p in placed.items() if p[0] == variant)
        if ids:
            lines.append(f"# {variant}: {len(ids)} cases")
            lines += [f"#   {nodeid}" for nodeid in ids]
    homeless = sorted(n for n, p in placed.items() if p[0] is None)
    if homeless:
        lines.append(f"# no variant has the GPUs these need: {len(homeless)} cases")
        lines += [f"#   {nodeid}" for nodeid in homeless]
    return "\n".join(lines)


def measured_lines(result: dict) -> list[str]:
    """What the cases of each variant run here did, and how many GPU-variant cases did not run."""
    lines = [
        f"Measured on this host, {variant} cases: {len(run['skips'])} skipped, "
        f"{len(run['fails'])} failed, {len(stanza.expected_failures(run))} failed as they "
        "expected to (nothing to declare)"
        for variant, run in measure.measured_runs(result)
    ]
    here = {variant for variant, _ in measure.measured_runs(result)}
    missed = sum(1 for p in result["placed"].values() if p[0] is not None and p[0] not in here)
    if missed:
        lines.append(f"{missed} GPU-variant cases not run on this host")
    return lines


def report(path: pathlib.Path, result: dict, env: Environment, ran: bool) -> tuple[str, int]:
    """The printed report and the exit status."""
    placed = result["placed"]
    out = [f"# {path.name}: collected with {env.described}, GPUs hidden (as the cpu variant)"]
    out += [f"# its {v} cases ran as the {v} target runs them" for v in result.get("gpu_runs", {})]
    if result["errors"]:
        out.append("# CANNOT BE COLLECTED ON THIS HOST: the stanza below is not measured.")
        out += ["# " + line for e in result["errors"] for line in e.splitlines()[-15:]]
    lost = stanza.uncollected_classes(path.read_text(), placed)
    if lost:
        out.append(
            "# DEFINES TESTS NOTHING COLLECTS (no target would run them): " + ", ".join(lost)
        )
    if not placed and not result["errors"]:
        out.append("# NO TEST CASES: pytest collects nothing from this file.")
    deps = deps_of.labels_for(result, path, ROOT, env.manifest)
    proposed = stanza.proposals(path, result)
    args = stanza.stanza_args(result)
    ran_here = pack.cpu_cases(placed)
    cost = pack.Measured(path.name, result.get("seconds", 0.0), ran_here, len(placed), ()).cost
    size = pack.size_for(cost) if ran else None
    tags = pack.cpu_tags(result.get("ranks", 0)) if ran else []
    out.append(
        stanza.stanza(
            path,
            placed,
            deps.labels,
            bool(proposed.entries),
            args=args,
            size=size,
            tags=tags,
        )
    )
    if size:
        out.append(f"# {pack.size_line(size, cost)}")
    if tags:
        out.append(f"# {pack.cpu_line(result['ranks'])}")
    if ran and not result["errors"]:
        out += [f"# {line}" for line in stanza.crash_notes(result)]
    out += [f"# deps: {note}" for note in deps.notes]
    out.append("# Placement (cases per variant; each variant is a target):")
    out.append(placement(placed) or "#   none")
    if ran:
        out += [f"# {line}" for line in measured_lines(result)]
        out += [f"# {note}" for note in proposed.notes]
        if proposed.entries:
            out.append(f"# Review, then save as {path.stem}.expectations.toml beside the file:")
            out.append("\n".join(stanza.entry_text(e) for e in proposed.entries))
    return "\n".join(out), 1 if result["errors"] else 0


def main(path: pathlib.Path, run: bool) -> int:
    """Measures `path` (unless not `run`: collects only), prints the report, returns the status."""
    env = tests_environment()
    result = measure.collect(path, env, run)
    if run:
        measure.measure_gpu_variants(path, env, result, probe.visible_gpu_count())
    text, status = report(path, result, env, run)
    print(text)
    return status
