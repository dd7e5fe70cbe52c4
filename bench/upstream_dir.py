"""A directory of upstream test files taken in as a new user would, against plain pytest.

    python3 bench/upstream_dir.py DIR [DIR...] --venv VENV [--scratch PATH] [--jobs N]
                                  [--out FILE]

DIR: folders of test_*.py files outside this repository (e.g. PyTorch's test/dynamo at the tag
of the pinned torch), never copied into it. VENV: a venv of the pinned lock (its bin/python),
e.g. `python3 -m venv V && V/bin/pip install --no-deps --require-hashes -r
third_party/python/requirements.lock`, or an interpreter's path (a GPU host's image python,
with TORCH_TEST_PYTHON naming it too, so that add_test and the targets run in host mode).

1. Plain pytest, one process per file, N at a time (default: the cores), GPUs hidden as the
   cpu variant hides them, each with its JUnit XML; the total wall is timed.
2. A scratch copy of this checkout's current tree (tracked and untracked files, not ignored
   ones) at PATH (outside the repository; Bazel gives it its own output base), each DIR copied
   in as package `upstream/<DIR's name>`. There, timed: `python3 tools/add_test.py PKG`; then,
   as the person who confirms, every `proposed = true` line it wrote is removed (counted:
   "confirmed proposals"); then `tools/bazel test //upstream/...`.
3. Each cpu case's verdict, read from the targets' records (tools/results: junit.cases over
   the build events' test.xml files), compared with plain pytest's JUnit case by case:
   agreement, every disagreement, per-target wall pairs and the hand fixes that would be
   needed (files add_test could not write, red targets). A file whose stanza passes pytest
   arguments (add_test's, where pytest crashed) is run by plain pytest again with them. A case
   only plain pytest has is a GPU variant's when plain pytest skipped it here (its target is
   SKIPPED on a CPU host), and so is a GPU target's case that plain pytest skipped (a GPU host).

Writes a dated report (default bench/results/upstream_dir_<date>_cpu.md) with the machine, the
date and the command. Standard library and the repository's readers only.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.addtest import merge  # noqa: E402
from tools.hardware import probe, table  # noqa: E402
from tools.results import bep, facts, junit, record  # noqa: E402

PACKAGE = "upstream"
_HIDDEN_GPUS = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}
PLAIN_TIMEOUT_S = 1800
# A GPU variant's target (on a GPU host): plain pytest, GPUs hidden, skips its cases.
_GPU_SUFFIXES = tuple(f"_{v}" for v in table.table()["VARIANTS"] if v != "cpu")


def local_id(node_id: str) -> str:
    """A node id without the file's directories: how plain pytest and a target's record meet."""
    path, sep, rest = node_id.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def verdict(case: record.Case) -> str:
    """What a case did as plain pytest would have it: what a declaration accepted (a failure or
    a skip), else its outcome (plain pytest's JUnit reads into record.Case too)."""
    if case.of.kind:
        return record.FAILED if case.of.raised else record.SKIPPED
    return case.outcome


# ---- 1. plain pytest


def plain_pytest(
    files: list[pathlib.Path], venv: pathlib.Path, out: pathlib.Path, jobs: int, args=None
):
    """{file: (wall s, exit status, junit xml)}, and the total wall. `args`: {file: pytest
    arguments its stanza passes}, which plain pytest then gets too (its files apart)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TEST_")}
    env.update(_HIDDEN_GPUS, PYTHONDONTWRITEBYTECODE="1")

    def one(path):
        xml = out / _xml_name(path)
        python = venv if venv.is_file() else venv / "bin" / "python"
        argv = [str(python), "-m", "pytest", path.name, "-q"]
        argv += ["-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={xml}"]
        argv += (args or {}).get(path, [])
        start = time.monotonic()
        with xml.with_suffix(".log").open("w") as log:
            try:
                code = subprocess.run(
                    argv,
                    cwd=path.parent,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=PLAIN_TIMEOUT_S,
                ).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        return time.monotonic() - start, code, xml

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip(files, pool.map(one, files), strict=True))
    return done, time.monotonic() - start


# ---- 2. the scratch copy, add_test, confirmation, bazel test


def scratch_copy(scratch: pathlib.Path, dirs: list[pathlib.Path]) -> list[pathlib.Path]:
    """This checkout's current tree at `scratch`, each DIR in it as upstream/<name>."""
    if scratch.exists():
        shutil.rmtree(scratch)
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, scratch / name)
    packages = []
    for directory in dirs:
        package = scratch / PACKAGE / directory.name
        shutil.copytree(directory, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        packages.append(package)
    return packages


def timed(argv, cwd, log: pathlib.Path) -> tuple[float, int]:
    start = time.monotonic()
    with log.open("w") as f:
        code = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    return time.monotonic() - start, code


def confirm(packages: list[pathlib.Path]) -> int:
    """Removes every `proposed = true` line add_test wrote, as a person confirming them would."""
    count = 0
    for package in packages:
        for toml in sorted(package.glob("*.expectations.toml")):
            lines = toml.read_text().splitlines(keepends=True)
            kept = [line for line in lines if line.strip() != "proposed = true"]
            count += len(lines) - len(kept)
            toml.write_text("".join(kept))
    return count


# ---- 3. the comparison


def plain_cases(plain: dict) -> dict[str, record.Case]:
    found = {}
    for _, _, xml in plain.values():
        if xml.is_file():
            for c in junit.cases(xml):
                if not c.node_id.startswith("pytest::"):  # not pytest's INTERNALERROR entry
                    found[local_id(c.node_id)] = c.case
    return found


def target_cases(targets: dict) -> tuple[dict[str, tuple[str, record.Case]], dict[str, float]]:
    """{local id: (target, case)} of every case a target's records hold; {target: wall s}."""
    found, walls = {}, {}
    for label, target in targets.items():
        for attempt in target.final_attempts():
            rec = facts.of(attempt)
            walls[label] = walls.get(label, 0.0) + (facts.wall_s(rec) or attempt.duration_s)
            if attempt.xml and attempt.xml.is_file():
                for c in junit.cases(attempt.xml):
                    found[local_id(c.node_id)] = (label, c.case)
    return found, walls


def compare(plain: dict[str, record.Case], ours: dict[str, tuple[str, record.Case]]) -> dict:
    agree, declared, gpu, disagree = 0, 0, 0, []
    for test in sorted(set(plain) | set(ours)):
        mine = ours.get(test)
        theirs = plain.get(test)
        on_gpu = mine is not None and mine[0].endswith(_GPU_SUFFIXES) and theirs is not None
        if mine is None or on_gpu and theirs.outcome == record.SKIPPED:
            if theirs.outcome == record.SKIPPED:
                gpu += 1  # a GPU variant's case: plain pytest skips it on this host
            else:
                disagree.append((test, theirs.outcome, "in no cpu target", ""))
            continue
        label, case = mine
        if theirs is None:
            disagree.append((test, "not run by plain pytest", case.outcome, label))
        elif verdict(case) == theirs.outcome:
            agree += 1
            declared += case.of.kind not in (None, "not applicable")
        else:
            disagree.append((test, theirs.outcome, f"{case.outcome} {case.message[:80]}", label))
    return {"agree": agree, "declared": declared, "gpu": gpu, "disagree": disagree}


# ---- the report


def report(args, facts_: dict) -> str:
    f = facts_
    cmp_ = f["compare"]
    lines = [
        f"# A directory of upstream test files vs plain pytest, {f['date']}, {f['machine']}",
        "",
        f"- Machine: {f['machine']} ({os.cpu_count()} cores), Python {platform.python_version()}"
        f", plain pytest in `{args.venv}`.",
        f"- Date: {f['date']}.",
        f"- Command: `{f['command']}`",
        f"- Files: {f['files']} test files in {', '.join(d.name for d in args.dirs)}.",
        "",
        "| step | wall s | status |",
        "| --- | ---: | --- |",
        f"| plain pytest, one process per file, {args.jobs} at a time | {f['plain_wall']:.1f} | "
        f"{f['plain_status']} |",
        f"| `tools/bazel build @pypi//:manifest.json` (the copy's fetch) | "
        f"{f['fetch_wall']:.1f} | |",
        f"| `python3 tools/add_test.py PKG` (all packages) | {f['add_test_wall']:.1f} | "
        f"exit {f['add_test_codes']} |",
        f"| `tools/bazel test //{PACKAGE}/...` (first run) | "
        f"{f['bazel_wall']:.1f} | exit {f['bazel_code']} |",
        "",
        f"Targets: {f['targets']} ({f['green']} green, {f['red']} red, {f['skipped']} not run "
        f"on this host), {f['packs']} of them packs.",
        f"Confirmed proposals (`proposed = true` lines removed): {f['confirmed']}.",
        f"Hand fixes needed: {f['hand_fixes']} ({f['red']} red targets, "
        f"{f['uncollected']} files add_test could not write).",
        "",
        f"Cases: {cmp_['agree']} of {cmp_['agree'] + len(cmp_['disagree'])} cpu cases agree with "
        f"plain pytest ({cmp_['declared']} of them through a confirmed declaration); "
        f"{cmp_['gpu']} cases are GPU variants' (plain pytest skipped them here).",
        "",
    ]
    if f["argued"]:
        lines += ["## Files whose stanza passes pytest arguments", ""]
        lines += ["Plain pytest is compared as run with the same arguments.", ""]
        lines += ["| file | args | cases in plain pytest's default run | with the args |"]
        lines += ["| --- | --- | ---: | ---: |"]
        lines += [f"| `{n}` | `{a}` | {d} | {w} |" for n, a, d, w in f["argued"]]
        lines.append("")
    if cmp_["disagree"]:
        lines += ["## Disagreements", "", "| case | plain pytest | target | target's |"]
        lines += ["| --- | --- | --- | --- |"]
        lines += [f"| `{t}` | {p} | {o} | {lbl} |" for t, p, o, lbl in cmp_["disagree"]]
        lines.append("")
    if f["red_targets"]:
        lines += ["## Red targets", ""] + [f"- `{lbl}`: {why}" for lbl, why in f["red_targets"]]
        lines.append("")
    lines += ["## Wall per target", "", "| target | files | plain pytest s (sum) | target s |"]
    lines += ["| --- | --- | ---: | ---: |"]
    lines += [f"| `{lbl}` | {n} | {p:.1f} | {t:.1f} |" for lbl, n, p, t in f["pairs"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=lambda p: pathlib.Path(p).resolve())
    # Not resolved: a venv's bin/python is a link out of the venv, which it would lose.
    parser.add_argument("--venv", required=True, type=lambda p: pathlib.Path(p).absolute())
    parser.add_argument("--scratch", type=pathlib.Path, default=pathlib.Path("/tmp/upstream_dir"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep what the last run measured (its state.json): run plain pytest only for the "
        "files without a JUnit file, and add_test and bazel test only when not done",
    )
    args = parser.parse_args()
    scratch = args.scratch.resolve()
    if ROOT in [scratch, *scratch.parents] or any(ROOT in [d, *d.parents] for d in args.dirs):
        raise SystemExit("the directories and the scratch copy must be outside the repository")
    today = datetime.date.today().isoformat()
    out = args.out or ROOT / "bench" / "results" / f"upstream_dir_{today}_cpu.md"
    work = pathlib.Path(f"{scratch}_logs")
    work.mkdir(parents=True, exist_ok=True)

    files = sorted(p for d in args.dirs for p in d.glob("test_*.py"))
    state_file = work / "state.json"
    state = json.loads(state_file.read_text()) if args.resume and state_file.is_file() else {}

    def save(**values):
        state.update(values)
        state_file.write_text(json.dumps(state, indent=1))

    plain_dir = work / "plain"
    plain = {}
    for p in files:
        xml = plain_dir / _xml_name(p)
        if args.resume and xml.is_file():
            plain[p] = (state.get("plain_walls", {}).get(str(p), _log_wall(xml)), "kept", xml)
    todo = [p for p in files if p not in plain]
    print(f"plain pytest: {len(todo)} files, {args.jobs} at a time", flush=True)
    ran, wall = plain_pytest(todo, args.venv, plain_dir, args.jobs) if todo else ({}, 0.0)
    plain.update(ran)
    runs = [*state.get("plain_runs", []), [len(todo), round(wall, 1)]] if todo else []
    save(
        plain_walls={str(p): w for p, (w, _, _) in plain.items()},
        plain_runs=runs or state.get("plain_runs", []),
    )
    print(f"  {wall:.1f} s", flush=True)

    packages = [scratch / PACKAGE / d.name for d in args.dirs]
    events = work / "bep.json"
    # A resumed run keeps each step it finished: a GPU machine's call can stop between them.
    if "confirmed" not in state or not (scratch / PACKAGE).is_dir():
        packages = scratch_copy(scratch, args.dirs)
        # @pypi fetched first (the copy's own output base), so add_test's wall is its own.
        fetch_wall, _ = timed(
            ["tools/bazel", "build", "@pypi//:manifest.json"], scratch, work / "fetch.log"
        )
        print(f"@pypi fetch: {fetch_wall:.1f} s", flush=True)
        add_wall, add_codes = 0.0, []
        for package in packages:
            wall, code = timed(
                [sys.executable, "tools/add_test.py", str(package.relative_to(scratch))],
                scratch,
                work / f"add_test_{package.name}.log",
            )
            add_wall += wall
            add_codes.append(code)
        print(f"add_test: {add_wall:.1f} s, exit {add_codes}", flush=True)
        save(fetch_wall=fetch_wall, add_wall=add_wall, add_codes=add_codes)
        save(confirmed=confirm(packages))
    elif "bazel_wall" not in state:
        # The kept copy's output base may be gone with its machine: fetched again, untimed.
        timed(["tools/bazel", "build", "@pypi//:manifest.json"], scratch, work / "fetch.log")
    if "bazel_wall" not in state:
        bazel_wall, bazel_code = timed(
            [
                "tools/bazel",
                "test",
                "--keep_going",
                f"--build_event_json_file={events}",
                f"//{PACKAGE}/...",
            ],
            scratch,
            work / "bazel_test.log",
        )
        print(f"bazel test: {bazel_wall:.1f} s, exit {bazel_code}", flush=True)
        save(bazel_wall=bazel_wall, bazel_code=bazel_code)
    # A stanza's `args` (add_test's, for a file whose default run crashed pytest) are how the
    # target runs the file: plain pytest is compared as run with them too.
    built = {package: stanzas(package) for package in packages}  # {package: its stanzas}
    with_args = stanza_args(built, args.dirs)
    args_dir = work / "plain_with_args"
    again = [p for p in with_args if not (args.resume and (args_dir / _xml_name(p)).is_file())]
    plain_pytest(again, args.venv, args_dir, args.jobs, with_args)
    argued = []
    for p, extra in sorted(with_args.items()):
        default_cases = len(plain_cases({p: plain[p]})) if p in plain else 0
        plain[p] = (plain.get(p, (0.0,))[0], "with args", args_dir / _xml_name(p))
        argued.append((p.name, " ".join(extra), default_cases, len(plain_cases({p: plain[p]}))))
    targets = bep.read(events) if events.is_file() else {}
    ours, walls = target_cases(targets)
    cmp_ = compare(plain_cases(plain), ours)

    red = [(lbl, t) for lbl, t in targets.items() if t.attempts and not t.green]
    red_targets = []
    for label, target in red:
        rec = facts.of(target.final_attempts()[0]) if target.final_attempts() else None
        log = target.log_files()
        red_targets.append((label, facts.first_error(rec, log[0].read_text() if log else "")))
    uncollected = sum(
        (work / f"add_test_{p.name}.log").read_text().count("CANNOT BE COLLECTED") for p in packages
    )
    pairs = []
    for package in packages:
        declared = built[package]
        for label in sorted(walls):
            if not label.startswith(f"//{PACKAGE}/{package.name}:"):
                continue
            name = label.rsplit(":", 1)[-1]
            members = declared.get(name, {}).get("srcs") or [f"{name}.py"]
            srcs = [p for p in files if p.parent.name == package.name and p.name in members]
            plain_s = sum(plain[p][0] for p in srcs if p in plain)
            pairs.append((label, len(srcs), plain_s, walls[label]))
    facts_ = {
        "date": today,
        "machine": f"{'GPU' if probe.visible_gpu_count() else 'CPU'} host {platform.node()}",
        "command": "python3 " + " ".join([sys.argv[0], *sys.argv[1:]]),
        "files": len(files),
        "plain_wall": sum(w for _, w in state["plain_runs"]),
        "plain_status": " + ".join(f"{n} files in {w} s" for n, w in state["plain_runs"]),
        "fetch_wall": state["fetch_wall"],
        "add_test_wall": state["add_wall"],
        "add_test_codes": state["add_codes"],
        "bazel_wall": state["bazel_wall"],
        "bazel_code": state["bazel_code"],
        "targets": len(targets),
        "green": sum(1 for t in targets.values() if t.green),
        "red": len(red),
        "skipped": sum(1 for t in targets.values() if not t.attempts),
        "packs": sum(1 for lbl in targets if ":packed_" in lbl),
        "confirmed": state["confirmed"],
        "uncollected": uncollected,
        "hand_fixes": len(red) + uncollected,
        "compare": cmp_,
        "red_targets": red_targets,
        "pairs": pairs,
        "argued": argued,
    }
    text = report(args, facts_)
    out.write_text(text)
    print(text)
    return 0 if facts_["hand_fixes"] == 0 and not cmp_["disagree"] else 1


def _xml_name(path: pathlib.Path) -> str:
    return f"{path.parent.name}__{path.stem}.xml"


def _log_wall(xml: pathlib.Path) -> float:
    """A kept plain run's wall: from its log's creation to its last write (1 s resolution)."""
    log = xml.with_suffix(".log")
    born = subprocess.run(["stat", "-c", "%W", log], capture_output=True, text=True).stdout
    return max(0.0, log.stat().st_mtime - int(born or 0))


def stanzas(package: pathlib.Path) -> dict[str, dict]:
    """{target name: its torch_test arguments} of the package's BUILD file."""
    build = (package / "BUILD.bazel").read_text()
    return {b.value.get("name"): b.value for _, _, b in merge.read_build(build)[1]}


def stanza_args(built: dict[pathlib.Path, dict], dirs: list[pathlib.Path]) -> dict:
    """{file of DIR: the pytest arguments its stanza passes}, for files whose stanza has some;
    `built`: {package: its stanzas}, the packages in the order of `dirs`."""
    found = {}
    for declared, directory in zip(built.values(), dirs, strict=True):
        for name, arguments in declared.items():
            if arguments.get("args") and "srcs" not in arguments:
                found[directory / f"{name}.py"] = list(arguments["args"])
    return found


if __name__ == "__main__":
    sys.exit(main())
