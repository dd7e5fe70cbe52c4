"""add_test for a directory tree: writes a BUILD.bazel and the expectations files of the tests
of DIR and of each of its sub-folders that holds a test_*.py (each such folder is a Bazel
package of its own); the folders it skips, and why, are said (hidden ones, links, caches).

    python3 tools/add_test.py DIR [--no-run] [--jobs N]      (DIR inside this repository)

Every `test_*.py` of the tree is collected and (unless --no-run) run once, as file mode does
for one file, in the tests' environment with the GPUs hidden: one process per file, N at a time
(default: the cores), with no Bazel command unless @pypi was never fetched. On a host with GPUs,
the cases of each GPU variant it has the GPUs for then run, one file at a time. Then it writes:
  - DIR/BUILD.bazel: one torch_test per file that could be collected (stanza.stanza);
  - DIR/test_x.expectations.toml: the measured outcomes (stanza.proposals): skips with their
    reason, failures as `fail` entries and expected failures that passed as `pass` entries,
    both with `proposed = true`, which the runner refuses until a person removes that line.
Each stanza and entry it writes is preceded by `# add_test: generated <digest>` (merge.py). On
a re-run it replaces what it wrote that is unchanged since (by digest, so a
formatter's reflow is no change), removes what it wrote for a file or an outcome that is gone,
and keeps everything else: a stanza or entry a person edited (a confirmed entry among them) or
wrote, saying so where the new measurement differs from it. Every change is printed. A re-run
measures again only the files whose content changed since the last (record.py keeps what was
measured beside the BUILD file; --remeasure measures all), and keeps a target's files together
while their cost moved by no more than pack.keeps allows.
A new pack is run once more as its target runs it, its files in one process: where a case
reads otherwise than when its file ran alone (a file before it left state in the process, e.g.
a process group it never destroyed), the pack's files get targets of their own, and it says so.
Exit status 1 when a file could not be collected (its stanza is not written or kept as it was).
"""

import concurrent.futures
import dataclasses
import os
import pathlib

from tools.addtest import deps as deps_of
from tools.addtest import measure as measuring
from tools.addtest import merge, pack, record, stanza
from tools.addtest.environment import ROOT, tests_environment
from tools.hardware import probe


def test_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.glob("test_*.py") if p.is_file())


def timed_out(result: dict) -> list[str]:
    """The cases of a run that failed by torch's multi-process timeout (common_distributed's
    "Process R terminated or timed out after S seconds")."""
    return [n for n, first, _ in result["fails"] if TIMED_OUT in (first or {}).get("msg", "")]


TIMED_OUT = "terminated or timed out after"


def measure(files, env, run: bool, jobs: int, gpus: int) -> dict:
    """{file: its collection result, or the text of why it could not be had}, `jobs` at once;
    a file with a case that timed out beside others again alone (result["alone_after"]: those
    cases); then the cases of the GPU variants a host of `gpus` GPUs can run."""

    def one(path):
        try:
            return measuring.collect(path, env, run)
        except SystemExit as error:  # collect's message: the child's output
            return str(error)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = dict(zip(files, pool.map(one, files), strict=True))
    # A 2-rank file beside another on 2 cores ran past torch's 300 s per-case timeout where alone
    # it passes: its time is the host's load, not a failure to propose (DTensor, 2026-12-03).
    for path, result in results.items() if run and jobs > 1 else ():
        if not isinstance(result, str) and timed_out(result):
            again = one(path)
            if not isinstance(again, str):
                results[path] = again | {"alone_after": timed_out(result)}
    if run:  # a file's GPU variants after every cpu run, one file at a time: none share a GPU
        for path, result in results.items():
            if not isinstance(result, str):
                measuring.measure_gpu_variants(path, env, result, gpus)
    return results


def imported_beside(directory: pathlib.Path, path: pathlib.Path, result: dict) -> list[str]:
    """The modules of `directory` (not `path` itself) that collecting `path` imported."""
    found = set()
    for file in result["modules"].values():
        if not file or not os.path.isabs(file):
            continue
        real = pathlib.Path(os.path.realpath(file))
        if real.parent == directory.resolve() and real != path.resolve():
            found.add(real.name)
    return sorted(found)


def helpers(directory: pathlib.Path, imported) -> list[str]:
    """Of the `imported` files of `directory`, those no py_library but add_test's own lists
    (a test file another test imports among them)."""
    builds = deps_of.BuildFiles(ROOT)
    own = f"//{builds.package_of(directory / 'x.py')}:{merge.HELPERS}"
    return sorted(n for n in set(imported) if builds.library_of(directory / n) in (None, own))


def helper_files(directory: pathlib.Path, results: dict) -> list[str]:
    """helpers() of what the collections of `results` imported from `directory`."""
    imported = [
        name
        for path, result in results.items()
        if not isinstance(result, str)
        for name in imported_beside(directory, path, result)
    ]
    return helpers(directory, imported)


# ---- the command


def _counts(placed: dict) -> str:
    counts = {}
    for variant, _ in placed.values():
        counts[variant or "no variant"] = counts.get(variant or "no variant", 0) + 1
    return " ".join(f"{v}={n}" for v, n in counts.items()) or "no cases"


def _result_line(path: pathlib.Path, result: dict, proposed, ran: bool) -> str:
    line = f"{path.name}: {_counts(result['placed'])}"
    for variant, run in measuring.measured_runs(result) if ran else []:
        ours = [e["outcome"] for e in proposed.entries if e["variants"] == [variant]]
        line += (
            f"; {variant} cases measured: {len(run['skips'])} skipped, {ours.count('fail')} "
            f"failed (proposed), {len(stanza.expected_failures(run))} failed as expected, "
            f"{ours.count('pass')} passed against their expectation (proposed)"
        )
    return line


def _case_lines(before: record.Measured | None, now: record.Measured) -> list[str]:
    """A line for each case new since the last run, and for each one gone."""
    if before is None:
        return []
    new = [f"    new case: {c} ({now.placed[c][0]})" for c in now.placed if c not in before.placed]
    gone = [f"    case gone: {c}" for c in before.placed if c not in now.placed]
    return new + gone


def _owned_groups(directory: pathlib.Path, build_text: str | None, files) -> dict:
    """{stanza key: [its files]} of the torch_test stanzas a person owns: edited or written by
    hand, or whose expectations file holds an entry a person edited or wrote (a confirmed
    proposal). add_test keeps how those files are arranged."""
    owned = {}
    for key, members, block in _groups(build_text, files):
        args = block.value
        toml = directory / str(args.get("expectations", ""))
        mine = toml.is_file() and any(
            not b.generated for b in merge.read_entries(toml.read_text())[1]
        )
        if not block.generated or mine:
            owned[key] = members
    return owned


def _groups(build_text: str | None, files):
    """(stanza key, [its files among `files`], block) of the BUILD file's torch_test stanzas."""
    for _, _, block in merge.read_build(build_text)[1] if build_text else []:
        args = block.value
        members = args.get("srcs") if isinstance(args.get("srcs"), list) else [block.key]
        members = [m for m in members if isinstance(m, str) and m in files]
        if block.key is not None and members:
            yield block.key, members, block


def _kept_groups(build_text, measured: dict, before: dict) -> dict:
    """{stanza key: [its files]} of the stanzas add_test wrote whose files a re-run keeps as
    they are (pack.keeps: the same files, their cost moved by no more than the margin)."""
    kept = {}
    for key, members, block in _groups(build_text, measured):
        if block.generated and all(m in before for m in members):
            if pack.keeps(
                [before[m].costed() for m in members], [measured[m].costed() for m in members]
            ):
                kept[key] = members
    return kept


def _arrange(measured: dict, fixed: dict[str, list[str]]) -> dict[str, list]:
    """{stanza key: [its files]}: pack.plan, the `fixed` groups kept."""
    keys = {tuple(group): key for key, group in fixed.items()}
    out = {}
    costed = [m.costed() for m in measured.values()]
    for group in pack.plan(costed, list(fixed.values())):
        if tuple(group) in keys:
            out[keys[tuple(group)]] = group
        elif len(group) == 1:
            out[group[0]] = group
        else:
            out[pack.pack_name(group)] = group
    return out


def verdicts(result: dict) -> dict[str, tuple]:
    """{case: what it did} of a run's cpu cases, a failure by its type and the start of its
    message an entry would match (stanza.stable_prefix)."""
    out = {n: ("passed",) for n, p in result["placed"].items() if p[0] == "cpu"}
    out |= {n: ("skipped", stanza.stable_prefix(why)) for n, why in result["skips"]}
    out |= {n: ("xfailed",) for n in result["xfails"]} | {
        n: ("xpassed",) for n in result["xpassed"]
    }
    for n, first, _ in result["fails"]:
        out[n] = ("failed", first.get("type"), stanza.stable_prefix(first.get("msg") or ""))
    return out


def _said(verdict: tuple | None) -> str:
    return "did not run" if verdict is None else " ".join(filter(None, verdict))


def _split_packs(directory, arranged, fixed, results, measured, together) -> list[str]:
    """Runs each new pack's files in one process (`together(paths, deps, requires)`, which is
    measure.together); a pack where a case of a file measured now reads otherwise than alone
    has its files marked to run alone (in `measured`). What it says."""
    by_name = {p.name: r for p, r in results.items() if not isinstance(r, str)}
    said = []
    for key, group in arranged.items():
        fresh = [n for n in group if n in by_name]
        if len(group) < 2 or key in fixed or not fresh:
            continue
        labels = sorted({d for n in group for d in measured[n].deps})
        alone = {c: v for n in fresh for c, v in verdicts(by_name[n]).items()}
        try:
            packed = verdicts(
                together([directory / n for n in group], labels, by_name[fresh[0]]["requires"])
            )
        except SystemExit as error:  # collect's message: the child's output
            packed, why = {}, str(error).splitlines()[0]
        else:
            why = None
        differ = [c for c, v in alone.items() if packed.get(c) != v]
        if not differ:
            continue
        for n in group:
            measured[n] = dataclasses.replace(measured[n], alone=True)
        case = differ[0]
        said.append(
            f"{key}: NOT PACKED: its {len(group)} files get targets of their own: run in one "
            f"process, {len(differ)} case(s) read otherwise than alone, e.g. "
            f"{stanza.local_name(pathlib.Path(case.split('::')[0]), case)}: "
            f"{why or _said(packed.get(case))}; alone: {_said(alone[case])}"
        )
    return said


def _write_entries(toml: pathlib.Path, entries: list[dict], **how) -> list[str]:
    old = toml.read_text() if toml.is_file() else None
    new, said = merge.merge_entries(old, entries, toml.name, **how)
    if new is None and old is not None:
        toml.unlink()
    elif new is not None and new != old:
        toml.write_text(new)
    return said


def _reusable(directory: pathlib.Path, results: dict, env, ran: bool) -> tuple[dict, dict]:
    """The record's files (as last measured), and those of them not measured now whose
    content is as recorded, in an environment as recorded: written from the record."""
    environment, before = record.read(directory)
    if not ran:
        return before, {}
    if environment != record.environment_key(env.manifest):
        return before, {}
    now = {p.name for p in results}
    reuse = {
        name: m
        for name, m in before.items()
        if name not in now
        and (directory / name).is_file()
        and record.content_hash(directory / name) == m.sha256
    }
    return before, reuse


def _measured(path: pathlib.Path, result: dict, entries: list[dict], deps: list[str]):
    """The record.Measured of a file measured now."""
    directory = path.parent
    return record.Measured(
        name=path.name,
        sha256=record.content_hash(path),
        placed={stanza.local_name(path, n): p for n, p in result["placed"].items()},
        seconds=result.get("seconds", 0.0),
        variants=[v for v, _ in measuring.measured_runs(result)],
        alone=stanza.runs_alone(result),
        args=stanza.stanza_args(result),
        entries=entries,
        deps=deps,
        beside=imported_beside(directory, path, result),
        ranks=result.get("ranks", 0),
    )


def write(
    directory: pathlib.Path, results: dict, env, ran: bool, together=None
) -> tuple[list[str], int]:
    """Writes DIR's files from the measured `results`, and from the record for every file not
    measured now whose content is as recorded; what it says, and the exit status. `together`:
    as measure.together (env bound), to run a new pack's files in one process (None: not run)."""
    said, status, stanzas, measured, no_cases = [], 0, {}, {}, {}
    build = directory / "BUILD.bazel"
    old = build.read_text() if build.is_file() else None
    before, reuse = _reusable(directory, results, env, ran)
    # Written first: the tests' deps name it (deps.py reads the BUILD file).
    imported = [n for m in reuse.values() for n in m.beside]
    imported += [
        n
        for p, r in results.items()
        if not isinstance(r, str)
        for n in imported_beside(directory, p, r)
    ]
    with_helpers, changes = merge.merge_helpers(old, helpers(directory, imported))
    if with_helpers != (old or ""):
        build.write_text(with_helpers)
    said += changes
    for path, result in results.items():
        if isinstance(result, str) or result["errors"]:
            status = 1
            why = result if isinstance(result, str) else result["errors"][0]
            said.append(f"{path.name}: CANNOT BE COLLECTED ON THIS HOST: its stanza is not written")
            said += ["    " + line for line in why.splitlines()[-8:]]
            stanzas[path.name] = None
            continue
        if not result["placed"]:  # a module other tests import, named like a test
            said.append(f"{path.name}: NO TEST CASES: pytest collects nothing, no stanza written")
            no_cases[path.name] = _measured(path, result, [], [])
            continue
        proposed = stanza.proposals(path, result) if ran else stanza.Proposals([], [])
        said.append(_result_line(path, result, proposed, ran))
        if ran:
            said += [f"    {note}" for note in stanza.crash_notes(result)]
        if result.get("alone_after"):
            said.append(
                f"    measured again alone: {len(result['alone_after'])} case(s) passed torch's "
                "multi-process timeout beside other files; what this run measured is written"
            )
        said += [f"    {note}" for note in proposed.notes]
        lost = stanza.uncollected_classes(path.read_text(), result["placed"])
        if lost:
            said.append("    DEFINES TESTS NOTHING COLLECTS: " + ", ".join(lost))
        deps = deps_of.labels_for(result, path, ROOT, env.manifest)
        said += [f"    deps: {note}" for note in deps.notes]
        measured[path.name] = _measured(path, result, proposed.entries, deps.labels)
        said += _case_lines(before.get(path.name), measured[path.name])
    for name, m in sorted(reuse.items()):
        said.append(
            f"{name}: unchanged since the last run, not measured again: {_counts(m.placed)}"
        )
        (measured if m.placed else no_cases)[name] = m
    measured = dict(sorted(measured.items()))
    old_tomls = {
        b.value.get("expectations")
        for _, _, b in (merge.read_build(old)[1] if old else [])
        if b.generated and isinstance(b.value.get("expectations"), str)
    }
    fixed = _kept_groups(old, measured, before) | _owned_groups(directory, old, measured)
    arranged = _arrange(measured, fixed)
    if ran and together is not None:
        split = _split_packs(directory, arranged, fixed, results, measured, together)
        if split:
            said += split
            arranged = _arrange(measured, fixed)
    where = {name: f"is in {key}'s stanza now" for key, g in arranged.items() for name in g}
    where |= {name: "collects no case now" for name in no_cases}
    where |= {
        p.name: "could not be collected"
        for p, r in results.items()
        if stanzas.get(p.name, 0) is None
    }
    written = set()
    for key, group in arranged.items():
        members = [measured[name] for name in group]
        packed = len(group) > 1 or key != group[0]
        stem = key if packed else pathlib.Path(group[0]).stem
        toml = directory / f"{stem}.expectations.toml"
        if ran:
            recorded = frozenset(e["test"] for m in members if not m.fresh for e in m.entries)
            entries = [e for m in members for e in m.entries]
            said += _write_entries(toml, entries, recorded=recorded)
        written.add(toml.name)
        placed = {n: p for m in members for n, p in m.placed.items()}
        deps = sorted({d for m in members for d in m.deps}, key=lambda d: (d.startswith("@"), d))
        args = members[0].args if not packed else None
        cost = sum(m.costed().cost for m in members)
        size = pack.size_for(cost)
        ranks = max(m.ranks for m in members)
        tags = pack.cpu_tags(ranks)
        stanzas[key] = stanza.stanza(
            directory / f"{stem}.py",
            placed,
            deps,
            toml.is_file(),
            group if packed else None,
            args,
            size,
            tags,
        )
        if size and any(m.fresh for m in members):
            said.append(f"{stem}: {pack.size_line(size, cost)}")
        if tags and any(m.fresh for m in members):
            said.append(f"{stem}: {pack.cpu_line(ranks)}")
        if packed and any(m.fresh for m in members):
            said.append(f"{key}: packs {', '.join(group)}")
    for name in sorted(old_tomls - written):  # a target no longer written: its generated entries
        if ran:
            said += _write_entries(directory / name, [], moved=where)
    new, changes = merge.merge_build(with_helpers, stanzas, where)
    said += changes
    if new != old:
        build.write_text(new)
    if ran and record.write(directory, record.environment_key(env.manifest), measured | no_cases):
        said.append(f"{record.RECORD}: written (what was measured, by each file's content)")
    return said, status


# ---- a tree: each directory holding test files is a Bazel package of its own (a BUILD file)

# Directories a walk does not enter, by name, and why.
_NOT_ENTERED = {"__pycache__": "Python's bytecode cache"}
# A directory holding one of these is another Bazel workspace: not this one's package.
_WORKSPACE_FILES = ("WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel")


def packages(top: pathlib.Path) -> tuple[list[pathlib.Path], list[str]]:
    """The directories of `top`'s tree (itself included) that get a BUILD file, parents first:
    those holding a test_*.py; and, for every directory that gets none, why."""
    found, skipped = [], []

    def shown(directory):
        return f"{directory.relative_to(top.parent).as_posix()}/"

    def walk(directory):
        if test_files(directory):
            found.append(directory)
        else:
            skipped.append(f"{shown(directory)}: no test_*.py files, no BUILD file written")
        for child in sorted(p for p in directory.iterdir() if p.is_dir()):
            if child.is_symlink():
                why = "a link to a directory (not followed)"
            elif child.name.startswith("."):
                why = "hidden"
            elif child.name in _NOT_ENTERED:
                why = _NOT_ENTERED[child.name]
            elif any((child / name).is_file() for name in _WORKSPACE_FILES):
                why = "another Bazel workspace"
            else:
                walk(child)
                continue
            skipped.append(f"{shown(child)}: not entered: {why}")

    walk(top)
    return found, skipped


def to_measure(directory: pathlib.Path, env, gpus: int, remeasure: bool) -> list[pathlib.Path]:
    """The test files of `directory` a run measures: all of them where `remeasure` asks it or
    the record is of another environment; else those the record lacks, whose content changed
    since, or that have cases of a GPU variant this host can run and the record did not."""
    files = test_files(directory)
    environment, before = record.read(directory)
    if remeasure or environment != record.environment_key(env.manifest):
        return files
    return [
        f
        for f in files
        if f.name not in before
        or before[f.name].sha256 != record.content_hash(f)
        or set(measuring.gpu_variants_here(before[f.name].placed, gpus))
        - set(before[f.name].variants)
    ]


def run_tree(
    top: pathlib.Path,
    env,
    run: bool,
    jobs: int,
    gpus: int,
    say,
    measure=measure,
    remeasure: bool = False,
    together=None,
):
    """Measures the test files of `top`'s tree and writes each package's files, saying what it
    does with `say` (a line at a time); the exit status. `measure`: as measure() above. With
    `run`, only the files to_measure() names are measured (all: `remeasure`). `together`: as
    write()'s."""
    directories, skipped = packages(top)
    if not directories:
        raise SystemExit(
            "\n".join([f"{top}: no test_*.py files in it or its sub-folders"] + skipped)
        )
    if run:
        files = {d: to_measure(d, env, gpus, remeasure) for d in directories}
    else:  # collected only: nothing of the record is used
        files = {d: test_files(d) for d in directories}
    count = sum(len(f) for f in files.values())
    unchanged = sum(len(test_files(d)) for d in directories) - count
    say(
        f"# {top}: {count} files to measure in {len(directories)} package(s) ({unchanged} "
        f"unchanged since the last run), {jobs} at a time, with "
        f"{env.described}, GPUs hidden; then the GPU variants {gpus} GPU(s) can run, a file at "
        "a time"
    )
    for line in skipped:
        say(f"# skipped {line}")
    results = measure([f for d in directories for f in files[d]], env, run, jobs, gpus)
    status = 0
    for directory in directories:
        say(f"## {directory.relative_to(top.parent).as_posix()}/BUILD.bazel")
        measured_here = {f: results[f] for f in files[directory]}
        said, written = write(directory, measured_here, env, run, together)
        for line in said:
            say(line)
        status = max(status, written)
    return status


def main(directory: pathlib.Path, run: bool, jobs: int, remeasure: bool = False) -> int:
    """Measures the test files of DIR's tree (unless not `run`: collects only), `jobs` at a
    time, writes each package's files, prints what it did; the exit status."""
    directory = directory.resolve()
    if ROOT not in directory.parents:
        raise SystemExit(f"{directory} is not a directory of this repository ({ROOT})")
    env = tests_environment()
    gpus = probe.visible_gpu_count()

    def together(paths, labels, requires):
        return measuring.together(paths, env, labels, requires)

    return run_tree(
        directory, env, run, jobs, gpus, say=print, remeasure=remeasure, together=together
    )
