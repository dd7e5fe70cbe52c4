"""The upgrade gate: what does a candidate torch (or lock) change in this suite, test by test?

    python3 tools/gate/gate.py --candidate torch==2.15.0                  # a whole candidate
    python3 tools/gate/gate.py --candidate python:/opt/torch214/bin/python
    python3 tools/gate/gate.py --candidate lock:/path/candidate.lock //dynamo_tests/...

Sides (tools/gate/sides.py): `pinned` (default baseline), `lock:PATH`, `python:PATH` (host
mode), a bare path, or `torch==X.Y.Z`: requirements.in with torch pinned there and torchrec /
fbgemm moved to releases that load with it, installed once into a cached venv
(tools/gate/candidate.py) and gated as `python:`. Targets default to //... (GPU variants are
SKIPPED on both sides of a CPU host). A target named explicitly that is incompatible on one
side (a package missing there) is SKIPPED on that side, as under a pattern.

1. Checks both sides and fetches each side's @pypi: a bad side is one line, exit 2. Decides
   which hardware variants both sides can run on their hosts' GPUs (tools/gate/variant_plan.py):
   on a GPU host a side whose torch cannot use them runs its CPU variants instead of stopping
   at the GPU-host check, no GPU variant runs on one side only, and the report says which
   variants were compared and why the others were not. --bisect refuses a saved side that ran
   another tree than this checkout's (tools/gate/tree.py).
2. Runs the targets on each side with `tools/bazel test`, each side in its own output base
   (the pinned side in the workspace's own, every other side under
   ~/.cache/torch_tests/gate/<workspace>/<side>), and reads each run at once: its results
   (tools/results) and the logs of every target that did not simply pass, copied into the
   report directory (the next gate overwrites the output base).
3. Compares per test case (tools/gate/compare.py), and what ran on one side only (coverage).
4. Re-runs every compared case that did not pass on both sides on both sides, selected by
   exact node id (--test_env=TORCH_TEST_NODE_IDS, tools/runner/session/node_ids.py), in rounds
   of one `bazel test` per side up to --max-runs, and decides it on failure rates at
   --confidence (tools/gate/rates.py): regressed, fixed, flaky or broken on both, not decided.
   Every other regression's failing cases re-run twice more on the candidate: consistent,
   flaky, or not confirmed (the case did not run again).
   --repeat N gives each live side's run of step 2 N + 1 runs of every target (uncached): each
   case's runs and failures on each side are its first counts for the rates, so a case that
   passed the first run but fails now and then is found and decided as the re-runs decide.
5. --bisect: each regressed case alone on every torch release between the sides
   (tools/gate/culprit.py): "first changed in 2.14.1 (2.13.0 passed, 2.14.0 passed, ...)".
6. Writes report.md, report.json and report.html (one page: tools/gate/report_html.py) to --out
   (printed).

Exit codes: 0 every requested target and case ran on both sides (or has the same declared
outcome on both) and nothing regressed; 1 a regression: a case that passed on the baseline and
did not pass on the candidate, whatever explains it (an xfail marker, a declared fail or skip, a
skip, not applicable there), unless --accept-declared accepts the outcomes a declaration or a
marker explains (declared fail/skip, not applicable, xfail), or a quarantined case (a flaky
entry) whose failures over the candidate's runs exceed its rate (a failure within it is no
regression: tools/gate/quarantine.py); 4 incomplete: no regression, but
something ran on one side only or on neither (a skip, a case that never ran, a definition never
collected), could not be compared for infrastructure (tools/gate/infra.py: no NVIDIA driver
or no visible GPU for a CUDA build, CUDA out of memory, a rendezvous timeout, a refused GPU
lease, a lost remote worker; report.md lists what and why), or its rates were not decided
within --max-runs; 2 a bad side; 3 Bazel failed to run. A fix (a failure whose body now
passes, also against a stale declaration or xfail marker) and a case flaky or broken on both
sides never count against the verdict.

Outcomes and facts (hangs, peak RSS, what never ran) come from the runner's record of each
shard in its test.xml (tools/results), never from its log lines; a saved run from before the
record is read through pytest's JUnit outcomes.
"""

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script

from tools.gate import (  # noqa: E402
    candidate,
    compare,
    culprit,
    infra,
    patterns,
    rates,
    report,
    report_html,
    sides,
    tree,
    variant_plan,
)
from tools.hardware import envvars, table  # noqa: E402
from tools.results import bep, facts, junit  # noqa: E402

ROOT = sides.ROOT
BAZEL = ROOT / "tools" / "bazel"
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_BAZEL, EXIT_INCOMPLETE = 1, 2, 3, 4
NODE_IDS_ENV = envvars.NODE_IDS  # tools/runner/session/node_ids.py
CONFIRM_RUNS = 2
# Exit codes of `bazel test` that still leave complete results: ok, build failed (with
# --keep_going), tests failed, no tests ran.
RESULT_EXITS = (0, 1, 3, 4)
# Seconds a side's own Bazel server stays up idle after the gate (re-gating within it is warm).
SIDE_SERVER_IDLE_S = 900


def say(message: str) -> None:
    print(f"gate: {message}", file=sys.stderr, flush=True)


class Gate:
    def __init__(self, args):
        self.args = args
        workspace = hashlib.md5(str(ROOT).encode()).hexdigest()[:8]
        self.root = pathlib.Path(args.output_root or CACHE / "torch_tests" / "gate" / workspace)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.out = pathlib.Path(args.out).resolve() if args.out else self.root / "reports" / stamp

    def output_base(self, side: sides.Side) -> pathlib.Path | None:
        """None: the workspace's own output base (pinned side, unless --output-root)."""
        if side.kind == "pinned" and not self.args.output_root:
            return None
        return self.root / side.key

    def workspace(self, side) -> pathlib.Path:
        """Where Bazel runs for this side: the workspace, or a mirror of it without bazel-* links.

        The workspace's bazel-* links point into its own output base; a server with another
        output base does not know them as its links and would expand //... into that output
        base's external/ tree (Bazel 4.2.3 loads it even with -//bazel-x/... excluded). The
        mirror links every other top-level entry back to the workspace, so sources, BUILD files
        and cache keys are the same.
        """
        if self.output_base(side) is None:
            return ROOT
        mirror = self.root / "workspace"
        mirror.mkdir(parents=True, exist_ok=True)
        wanted = {p.name for p in ROOT.iterdir() if not p.name.startswith(("bazel-", ".git"))}
        for entry in mirror.iterdir():
            if entry.name not in wanted:
                entry.unlink()
        for name in wanted - {p.name for p in mirror.iterdir()}:
            (mirror / name).symlink_to(ROOT / name)
        return mirror

    def bazel(self, side, command: str, args: list, log_name: str) -> int:
        base = self.output_base(side)
        # A side's own server is idle once the gate ends: keep it warm for a re-gate, then let
        # it exit instead of holding its heap for Bazel's default 3 hours.
        startup = [f"--output_base={base}", f"--max_idle_secs={SIDE_SERVER_IDLE_S}"] if base else []
        # Other output bases make no bazel-* links (the mirror stays free of them).
        links = ["--symlink_prefix=/"] if base and command == "test" else []
        workspace = self.workspace(side)
        argv = [str(workspace / "tools" / "bazel"), *startup, command, *links, *args]
        log = self.out / log_name
        with log.open("w") as f:
            f.write(" ".join(argv) + "\n")
            f.flush()
            return subprocess.run(
                argv, cwd=workspace, env=side.env(os.environ), stdout=f, stderr=subprocess.STDOUT
            ).returncode

    def prepare(self, side) -> None:
        """Fetches the side's @pypi: a lock that does not resolve fails here, before any test."""
        if side.kind == "results":
            return  # a saved run: nothing to fetch or run
        log_name = f"{side.role}.fetch.log"
        if self.bazel(side, "fetch", ["@pypi//:torch"], log_name) == 0:
            return
        text = (self.out / log_name).read_text(errors="replace")
        raise sides.BadSide(f"{side.role} {side.description} does not resolve: {fetch_error(text)}")

    def run(self, side, targets: list, name: str | None = None, extra=()) -> dict:
        """One `bazel test` of the side, read at once: its results and copied evidence."""
        name = name or side.role
        if side.kind == "results":
            # A saved run (tools/gate/save_run.py): its own copies are the evidence.
            targets_read = bep.read_saved(side.path)
            say(f"{name}: {len(targets_read)} targets from the saved run {side.path}")
            return {
                "targets": targets_read,
                "snapshot": compare.snapshot(targets_read),
                "output_base": side.path,
                "wall_s": sides.saved(side).get("test_actions_s"),
            }
        events = self.out / f"{name}.bep.json"
        args = [
            "--keep_going",
            f"--build_event_json_file={events}",
            *extra,
            *self.args.bazel_arg,
            "--",
            *targets,
        ]
        start = time.monotonic()
        code = self.bazel(side, "test", args, f"{name}.bazel.log")
        if code not in RESULT_EXITS or not events.is_file():
            say(f"{name}: bazel test exited {code}; see {self.out / name}.bazel.log")
            sys.exit(EXIT_BAZEL)
        targets_read = keep_evidence(bep.read(events), self.out, name)
        exec_root = bep.exec_root(events)
        cached = sum(t.cached for t in targets_read.values())
        wall = time.monotonic() - start
        say(f"{name}: {len(targets_read)} targets in {wall:.1f} s ({cached} cached)")
        return {
            "targets": targets_read,
            "snapshot": compare.snapshot(targets_read),
            "output_base": exec_root.parent.parent if exec_root else self.output_base(side),
            "wall_s": round(wall, 1),
        }

    def skip_reason(self, side, output_base, label: str) -> str:
        if side.kind == "results":
            missing = sides.saved(side).get("manifest", {}).get("missing", [])
            return (
                f"missing in the saved run's interpreter: {', '.join(missing)}" if missing else ""
            )
        if side.kind != "python":
            return ""
        missing = sides.missing_packages(output_base)
        if not missing:
            return ""
        query = f"deps({label}) intersect set({' '.join('@pypi//:' + m for m in missing)})"
        log_name = f"{side.role}.query.log"
        self.bazel(side, "query", ["--output=label", query], log_name)
        lines = (self.out / log_name).read_text().splitlines()[1:]
        needed = sorted(line.split(":")[-1] for line in lines if line.startswith("@pypi//:"))
        if not needed:
            return ""
        why = candidate.record(side.path).get("nodeps_missing_reason")
        return f"needs {', '.join(needed)}, missing in {side.path}" + (f": {why}" if why else "")

    def reproduce(self, side, label: str, node_id: str | None) -> str:
        """The command that re-runs one regression on this side."""
        env = {k: v for k, v in side.env({}).items()}
        base = self.output_base(side)
        if side.kind == "results":  # on the saved run's host, with its interpreter
            python = sides.saved(side).get("python")
            host = python and "external/pypi" not in python
            env = {envvars.PYTHON: python if host else sides.PINNED_PYTHON}
            base = None
        parts = [f"{k}={shlex.quote(v)}" for k, v in env.items()] + ["tools/bazel"]
        if base:
            parts.append(f"--output_base={shlex.quote(str(base))}")
        parts += ["test", "--nocache_test_results"]
        if node_id:
            parts.append(shlex.quote(f"--test_env={NODE_IDS_ENV}={json.dumps([node_id])}"))
        return " ".join([*parts, label])

    def confirm(self, side, regressions: list) -> None:
        """Re-runs each regressed target's failing cases twice more on the candidate."""
        if side.kind == "results":
            for item in regressions:
                item["confirmation"] = {
                    "verdict": "not confirmed (a saved run: re-run it on its host)"
                }
            return
        by_target = {}
        for item in regressions:
            by_target.setdefault(item["target"], []).append(item)
        for n, (label, items) in enumerate(sorted(by_target.items())):
            ids = sorted({item["node_id"] for item in items if item.get("node_id")})
            extra = [f"--runs_per_test={CONFIRM_RUNS}", "--nocache_test_results"]
            # Whole-target regressions (no case to name) re-run the whole target.
            if ids and all(item.get("node_id") for item in items):
                extra.append(f"--test_env={NODE_IDS_ENV}={json.dumps(ids)}")
            what = ", ".join(ids) or "whole target"
            say(f"confirming {len(items)} regression(s) of {label}: {what}")
            run = self.run(side, [label], f"confirm-{n}", extra)
            target, snap = run["targets"].get(label), run["snapshot"].get(label)
            for item in items:
                item["confirmation"] = _verdict(target, snap, item)
                item["rerun_logs"] = [
                    str(a.log) for a in (target.attempts if target else []) if a.log
                ]

    def rate(self, by_role: dict, result: dict) -> None:
        """Re-runs every case marked `first_run` (compare.py) on both sides, in rounds, until
        tools/gate/rates.py decides it or the budget is spent; moves each to its verdict's list."""
        lists = [key for key in dict.fromkeys(rates.LISTS.values()) if key in result]
        items = [i for key in lists for i in result[key] if i.get("first_run")]
        if not items:
            return
        fixed = {role: "a saved run" for role, side in by_role.items() if side.kind == "results"}
        cases = {
            n: {role: rates.Count(*item["first_run"][role]) for role in ("baseline", "candidate")}
            for n, item in enumerate(items)
        }
        logs = {n: [] for n in cases}
        rounds = {"baseline": 0, "candidate": 0}

        def rerun(role: str, asks: dict) -> dict:
            rounds[role] += 1
            asked = [items[n] for n in asks]
            labels = sorted({item["target"] for item in asked})
            ids = sorted({item["node_id"] for item in asked if item.get("node_id")})
            extra = [f"--runs_per_test={max(asks.values())}", "--nocache_test_results"]
            if ids:  # a case without a node id (a run saved before records) cannot be named
                extra.append(f"--test_env={NODE_IDS_ENV}={json.dumps(ids)}")
            say(f"rates: {role} round {rounds[role]}: {len(asks)} case(s), {extra[0]}")
            run = self.run(by_role[role], labels, f"rates-{role}-{rounds[role]}", extra)
            got = {}
            for n in asks:
                target = run["targets"].get(items[n]["target"])
                got[n] = observed(target, items[n])
                logs[n] += [str(a.log) for a in (target.attempts if target else []) if a.log]
            return got

        args = self.args
        decisions = rates.settle(cases, rerun, args.confidence, args.max_runs, fixed)
        for n, item in enumerate(items):
            decision = decisions[n]
            decision["line"] = rates.line(decision)
            item["rates"] = decision
            cand = decision["candidate"]
            item["confirmation"] = (
                {"verdict": "not confirmed (a saved run: re-run it on its host)"}
                if "candidate" in fixed
                else {
                    "verdict": "consistent" if cand["failed"] == cand["runs"] else "flaky",
                    "failed_runs": cand["failed"],
                    "runs": cand["runs"],
                }
            )
            item["rerun_logs"] = logs[n]
        for key in lists:
            result[key] = [i for i in result[key] if "rates" not in i]
        for item in items:
            result[rates.LISTS[item["rates"]["verdict"]]].append(item)

    def run_case(self, release: str, label: str, node_ids: list) -> dict:
        """{node id: outcome} of those cases alone on a venv of torch==release (--bisect)."""
        python = candidate.build(f"torch=={release}")
        # On a GPU host a release's torch that cannot use the GPUs runs the CPU variants.
        side = dataclasses.replace(
            sides.parse("candidate", f"python:{python}"), plan_env=((envvars.CPU_ONLY, "1"),)
        )
        sides.check(side)
        self.prepare(side)
        extra = ["--nocache_test_results", f"--test_env={NODE_IDS_ENV}={json.dumps(node_ids)}"]
        name = f"bisect-{release}-{label.strip('/').replace(':', '-').replace('/', '-')}"
        target = self.run(side, [label], name, extra)["targets"].get(label)
        outcomes = {}
        for attempt in target.final_attempts() if target else []:
            if attempt.xml and attempt.xml.is_file():
                for c in junit.cases(attempt.xml):
                    if c.node_id in node_ids:
                        outcomes[c.node_id] = c.case.outcome
        return outcomes


def keep_evidence(targets: dict, out: pathlib.Path, name: str) -> dict:
    """Copies test.log/test.xml of every attempt of each target that did not simply pass (of
    every target in a re-run) into out/logs/<name>/; returns the targets pointing at the
    copies (the evidence stays when the output base is reused)."""
    kept = {}
    for label, target in targets.items():
        passed = target.status == "PASSED" and all(a.status == "PASSED" for a in target.attempts)
        if passed and name in ("baseline", "candidate"):  # re-runs keep every log
            kept[label] = target
            continue
        attempts = []
        for a in target.attempts:
            outputs = {}
            for key, path in a.outputs.items():
                if key not in ("test.log", "test.xml") or not path.is_file():
                    outputs[key] = path
                    continue
                dest = out / "logs" / name / label.strip("/").replace(":", "/")
                dest = dest / f"shard_{a.shard}_run_{a.run}_attempt_{a.attempt}" / key
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
                outputs[key] = dest
            attempts.append(dataclasses.replace(a, outputs=outputs))
        kept[label] = dataclasses.replace(target, attempts=attempts)
    return kept


def fetch_error(text: str) -> str:
    """The reason a fetch of @pypi failed: pip's first ERROR line, else pypi.bzl's fail()."""
    bazel_own = re.compile(
        r"fetch of repository|Error fetching|no such package|Analysis of|Build did"
    )
    errors = [e for e in re.findall(r"^ERROR: (.+)$", text, re.M) if not bazel_own.search(e)]
    fails = re.findall(r"^Error in fail: (.+)$", text, re.M)
    return (errors or fails or ["see the fetch log"])[0].strip()


def observed(target, item) -> tuple[int, int]:
    """(runs in which the case failed, runs in which it ran) of a re-run: a run fails where
    any attempt of it failed the case or hung in it (a retry's pass hides no failure)."""
    failed = ran = 0
    for run in sorted({a.run for a in target.attempts} if target else ()):
        attempts = [a for a in target.attempts if a.run == run]
        outcomes = _as_run(attempts, item["case"])
        hangs = [hang[0] for a in attempts if (hang := facts.hang(facts.of(a)))]
        if item.get("node_id") in hangs or compare.FAILED in outcomes:
            failed, ran = failed + 1, ran + 1
        elif any(o in compare.GOOD for o in outcomes):
            ran += 1
    return failed, ran


def _as_run(attempts, case_id) -> list[str]:
    """The outcomes of a case over attempts as its body ran: a pass against a stale
    expectation (which failed it) a pass."""
    return [
        compare.PASSED if c.case.stale else c.case.outcome
        for a in attempts
        if a.xml and a.xml.is_file()
        for c in junit.cases(a.xml)
        if c.id == case_id
    ]


def _verdict(target, snap, item) -> dict:
    """Consistent, flaky or not confirmed, from the re-runs' own results."""
    runs = 1 + CONFIRM_RUNS
    if target is None or not target.attempts:
        return {"verdict": "not confirmed (the re-runs produced no result)"}
    failed_runs, ran = 1, 0  # the gate's own run failed
    case_id = item.get("case")
    for run in sorted({a.run for a in target.final_attempts()}):
        attempts = [a for a in target.final_attempts() if a.run == run]
        if case_id is None:
            ran += 1
            failed_runs += any(a.status != "PASSED" for a in attempts)
            continue
        outcomes = _as_run(attempts, case_id)
        hangs = [hang[0] for a in attempts if (hang := facts.hang(facts.of(a)))]
        if item.get("node_id") in hangs:
            ran, failed_runs = ran + 1, failed_runs + 1  # it hung again
        elif outcomes:
            ran += 1
            failed_runs += any(o not in compare.GOOD for o in outcomes)
    if ran < CONFIRM_RUNS:
        return {
            "verdict": f"not confirmed (the case ran in {ran} of {CONFIRM_RUNS} re-runs)",
            "failed_runs": failed_runs,
            "runs": 1 + ran,
        }
    return {
        "verdict": "consistent" if failed_runs == runs else "flaky",
        "failed_runs": failed_runs,
        "runs": runs,
    }


def _resolve(role: str, spec: str) -> str:
    """A `torch==X` spec becomes the interpreter of its candidate venv (built once)."""
    if candidate.is_spec(spec):
        return f"python:{candidate.build(spec)}"
    return spec


def release(version: str | None) -> str:
    """A torch version's release key (2.15.0+cu132 -> 2.15), as expectations files name it."""
    return ".".join((version or "?").split("+")[0].split(".")[:2])


def _newly_declared(result: dict, candidate_torch: str | None, accept: bool) -> None:
    """Cases that passed on the baseline and, on the candidate only, have an outcome a
    declaration (fail, skip, not applicable) or an xfail marker accepts: a regression unless
    --accept-declared, which reports them as accepted."""
    for item in [r for r in result["regressions"] if r.get("newly_declared")]:
        item["message"] = f"newly declared on {release(candidate_torch)}: {item['newly_declared']}"
        item["confirmation"] = {"verdict": "declared for the candidate's release only"}
        if accept:
            result["regressions"].remove(item)
            result["declared"].append(
                dict(item, declared=f"{item['message']} (accepted: --accept-declared)")
            )


def stale_edit(item: dict, baseline_torch: str | None, candidate_torch: str | None) -> str:
    """The edit that removes the stale expectation of a case whose body passed on the
    candidate (item["stale"], compare.py): the entry, or the candidate's release from it where
    the baseline's release still needs it."""
    stale, cand, base = item["stale"], release(candidate_torch), release(baseline_torch)
    still = stale.get("other_needs_it")  # the baseline failed or skipped as it declares
    if stale.get("by") == "marker":
        if still:
            marker = "the test's xfail marker (or expectedFailure)"
            return f"make {marker} condition leave torch {cand} out"
        return "remove the test's xfail marker (or unittest.expectedFailure)"
    where = stale.get("file") or "the target's expectations file"
    if stale.get("entry") is None:  # a run saved before the record: no entry named
        return f"in {where}, remove the {stale.get('outcome')} declared for this test on {cand}"
    entry = f"[[expect]] #{stale['entry']} (test = {stale['test']!r})"
    if any(c in stale["test"] for c in "*?"):
        return (
            f"in {where}, {entry} is a pattern: leave this test out of it (and lower its count), "
            "or declare the tests that still fail one by one"
        )
    torch = stale.get("torch")
    if torch:
        rest = [r for r in torch if r != cand]
        if rest:
            return f"in {where}, {entry}: remove {cand!r} from torch = {torch}"
        return f"in {where}, delete {entry} (its torch = {torch} names only {cand})"
    if still:
        return f"in {where}, {entry}: add torch = [{base!r}] (still needed on {base} only)"
    return f"in {where}, delete {entry}"


def _stale_edits(result: dict, baseline_torch: str | None, candidate_torch: str | None) -> None:
    """Every item whose candidate body passed against a stale expectation gets its edit."""
    for items in result.values():
        for item in items if isinstance(items, list) else []:
            if item.get("stale"):
                item["stale"]["edit"] = stale_edit(item, baseline_torch, candidate_torch)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=["//..."])
    parser.add_argument(
        "--baseline", default="pinned", help="pinned | lock:PATH | python:PATH (default pinned)"
    )
    parser.add_argument("--candidate", required=True, help="pinned | lock:PATH | python:PATH")
    parser.add_argument(
        "--out", default=None, help="report directory (default: under the gate's cache)"
    )
    parser.add_argument("--output-root", default=None, help="put every side's output base here")
    parser.add_argument(
        "--bazel-arg", action="append", default=[], help="extra `bazel test` flag (repeatable)"
    )
    parser.add_argument(
        "--duration-threshold", type=float, default=25.0, help="percent (default 25)"
    )
    parser.add_argument("--duration-min-s", type=float, default=2.0, help="seconds (default 2)")
    parser.add_argument("--rss-threshold", type=float, default=25.0, help="percent (default 25)")
    parser.add_argument("--rss-min-mib", type=float, default=256.0, help="MiB (default 256)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=0,
        metavar="N",
        help="run every target N more times on each side (uncached), each case decided on its "
        "failure rates: finds cases that fail now and then",
    )
    parser.add_argument(
        "--bisect",
        action="store_true",
        help="name the first torch release between the sides where each regressed case changed",
    )
    parser.add_argument(
        "--accept-declared",
        action="store_true",
        help="a case that passed on the baseline and, on the candidate, has the outcome a "
        "declaration or a marker accepts (declared fail/skip, not applicable, xfail) is "
        "reported as accepted, not as a regression (a plain failure or skip still is one)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        default=rates.MAX_RUNS,
        help="runs per side, the first included, of a case that did not pass on both sides "
        f"(default {rates.MAX_RUNS})",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=rates.CONFIDENCE,
        help=f"of a regressed or fixed verdict on failure rates (default {rates.CONFIDENCE})",
    )
    args = parser.parse_args(argv)
    if not 0 < args.confidence < 1 or args.max_runs < 1:
        print("gate: --confidence must lie in (0, 1) and --max-runs be 1 or more", file=sys.stderr)
        return EXIT_BAD_INPUT

    started = time.monotonic()
    try:
        specs = {role: _resolve(role, getattr(args, role)) for role in ("baseline", "candidate")}
    except candidate.CandidateError as error:
        print(f"gate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    gate_sides = [sides.parse(role, spec) for role, spec in specs.items()]
    if args.repeat and gate_sides[1].kind == "results":
        print("gate: --repeat runs the candidate more often; a saved run cannot", file=sys.stderr)
        return EXIT_BAD_INPUT
    gate = Gate(args)
    try:
        for side in gate_sides:
            sides.check(side)
    except sides.BadSide as error:
        print(f"gate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    here = tree.state(ROOT)  # the tree every live side runs
    saved = {s.role: str(s.path) for s in gate_sides if s.kind == "results"}
    trees = {s.role: sides.saved(s) if s.role in saved else here for s in gate_sides}
    refusal = tree.bisect_refusal(trees, saved, here) if args.bisect else None
    if refusal:
        print(f"gate: {refusal}", file=sys.stderr)
        return EXIT_BAD_INPUT
    variants = table.table()["VARIANTS"]
    plan = variant_plan.plan(
        *(sides.gpu_facts(side) for side in gate_sides),
        {name: spec["gpus"] for name, spec in variants.items()},
    )
    gate_sides = [
        dataclasses.replace(side, plan_env=tuple(sorted(plan.env[side.role].items())))
        for side in gate_sides
    ]
    try:
        gate.out.mkdir(parents=True, exist_ok=True)
        for side in gate_sides:
            gate.prepare(side)
    except sides.BadSide as error:
        print(f"gate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    runs = {
        side.role: gate.run(side, args.targets, extra=first_runs(args.repeat))
        for side in gate_sides
    }
    # A saved run's targets the patterns do not select: not asked for, so not compared.
    outside = {
        label
        for side in gate_sides
        if side.kind == "results"
        for label in runs[side.role]["targets"]
        if not patterns.matches(label, args.targets)
    }
    for run in runs.values():
        _leave_out(run, outside)
    # Targets of a variant not both sides can run: out of the comparison (named in the report).
    left_out = variant_plan.left_out(
        runs["baseline"]["targets"], runs["candidate"]["targets"], plan, variants
    )
    for run in runs.values():
        _leave_out(run, left_out)
    thresholds = compare.Thresholds(
        duration_ratio=args.duration_threshold / 100,
        duration_s=args.duration_min_s,
        rss_ratio=args.rss_threshold / 100,
        rss_mib=args.rss_min_mib,
    )
    snaps = {role: run["snapshot"] for role, run in runs.items()}
    fingerprints = {
        side.role: sides.fingerprint(side, runs[side.role]["output_base"]) for side in gate_sides
    }
    differ = infra.difference(fingerprints["baseline"], fingerprints["candidate"])
    result = compare.compare(snaps["baseline"], snaps["candidate"], thresholds, differ)
    by_role = {side.role: side for side in gate_sides}
    for item in result["skipped_one_side"]:
        role = "baseline" if item["baseline"] == bep.SKIPPED else "candidate"
        item["reason"] = gate.skip_reason(by_role[role], runs[role]["output_base"], item["target"])
    for item in result["one_side"]:
        if item.get("skip", {}).get("reason"):
            item["reason"] = f"SKIPPED on one side: {item['skip']['reason']}"
        item.pop("skip", None)
    _newly_declared(result, fingerprints["candidate"].get("torch"), args.accept_declared)
    _stale_edits(result, *(fingerprints[role].get("torch") for role in ("baseline", "candidate")))
    gate.rate(by_role, result)
    to_confirm = [r for r in result["regressions"] if "confirmation" not in r]
    if to_confirm:
        gate.confirm(by_role["candidate"], to_confirm)
    if args.bisect and result["regressions"]:
        started_bisect = time.monotonic()
        culprit.bisect(
            result["regressions"],
            fingerprints["baseline"].get("torch"),
            fingerprints["candidate"].get("torch"),
            gate.run_case,
        )
        say(f"bisect: {time.monotonic() - started_bisect:.0f} s")
    for item in result["regressions"]:
        item["reproduce"] = gate.reproduce(by_role["candidate"], item["target"], item["node_id"])

    packages = {
        side.role: sides.packages(side, runs[side.role]["output_base"]) for side in gate_sides
    }
    code = exit_code(result)
    data = {
        "targets": " ".join(args.targets)
        + (
            f" (of a saved run, the targets these patterns select: {len(outside)} others it "
            "holds left out)"
            if "results" in {s.kind for s in gate_sides}
            else ""
        ),
        "exit_code": code,
        "thresholds": {
            "durations": f"±{args.duration_threshold:g} % and ≥ {args.duration_min_s:g} s",
            "rss": f"±{args.rss_threshold:g} % and ≥ {args.rss_min_mib:g} MiB",
        },
        "sides": {
            side.role: {
                "spec": f"{side.kind}:{side.path}",
                "asked": getattr(args, side.role),
                "description": side.description,
                "output_base": str(runs[side.role]["output_base"]),
                "fingerprint": fingerprints[side.role],
                "hardware": sides.hardware_of(side, runs[side.role]["output_base"], here),
                "wall_s": runs[side.role]["wall_s"],
            }
            for side in gate_sides
        },
        "package_changes": sides.package_changes(packages["baseline"], packages["candidate"]),
        "variants": {
            "compared": plan.compared,
            "not_compared": [
                {
                    "variant": name,
                    "reason": why,
                    "targets": sorted(label for label, v in left_out.items() if v == name),
                }
                for name, why in plan.not_compared.items()
            ],
        },
        "rates": {
            "confidence": args.confidence,
            "max_runs": args.max_runs,
            "test": "Fisher's exact one-sided",
            "interval": "Wilson score",
        },
        "tree_warnings": tree.warnings(trees, saved, lambda t: tree.known(ROOT, t)),
        "comparison": result,
        "target_status": {
            label: {
                "baseline": _status(snaps["baseline"].get(label)),
                "candidate": _status(snaps["candidate"].get(label)),
                "baseline_rss": getattr(snaps["baseline"].get(label), "peak_rss_mib", None),
                "candidate_rss": getattr(snaps["candidate"].get(label), "peak_rss_mib", None),
                # Every case, changed or not (the page counts the unchanged per target).
                "baseline_cases": _cases(snaps["baseline"].get(label)),
                "candidate_cases": _cases(snaps["candidate"].get(label)),
            }
            for label in sorted(set(snaps["baseline"]) | set(snaps["candidate"]))
        },
        "wall_s": round(time.monotonic() - started, 1),
    }
    (gate.out / "report.md").write_text(report.markdown(data, gate.out))
    (gate.out / "report.json").write_text(report.dump_json(data))
    (gate.out / "report.html").write_text(report_html.page(data, gate.out))
    verdict = report.verdict(data)
    print(f"gate: {verdict}; report: {gate.out / 'report.md'} (and report.json, report.html)")
    return code


def first_runs(repeat: int) -> list:
    """The `bazel test` flags of each side's own run: --repeat N more runs of every target."""
    return [f"--runs_per_test={1 + repeat}", "--nocache_test_results"] if repeat else []


def exit_code(result: dict) -> int:
    """1 a regression; else 4 where something ran on one side only, was not compared for
    infrastructure (tools/gate/infra.py) or its rates were not decided within the budget; else
    0. A fix, a case flaky or broken on both sides never counts against the verdict."""
    if result["regressions"]:
        return EXIT_REGRESSION
    incomplete = (*compare.COVERAGE_KEYS, "not_decided")  # not decided: the budget ran out
    return EXIT_INCOMPLETE if any(result.get(key) for key in incomplete) else 0


def _leave_out(run: dict, labels) -> dict:
    """The run without those targets (their results count neither as compared nor as changed)."""
    for key in ("targets", "snapshot"):
        run[key] = {label: t for label, t in run[key].items() if label not in labels}
    return run


def _cases(snap) -> int | None:
    return None if snap is None else len(snap.cases)


def _status(snap) -> str | None:
    if snap is None:
        return None
    return f"{snap.status} (cached)" if snap.cached else snap.status


if __name__ == "__main__":
    sys.exit(main())
