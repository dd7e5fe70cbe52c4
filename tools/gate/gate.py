"""The upgrade gate: what does a candidate torch (or lock) change in this suite, test by test?

    python3 tools/gate/gate.py --candidate python:/opt/torch214/bin/python
    python3 tools/gate/gate.py --candidate lock:/path/candidate.lock //dynamo_tests/...

Sides (tools/gate/sides.py): `pinned` (default baseline), `lock:PATH`, `python:PATH` (host
mode), or a bare path. Targets default to //... (GPU variants are SKIPPED on both sides of a
CPU host). A target named explicitly that is incompatible on one side (a package missing
there) is SKIPPED on that side, as under a pattern (tools/results/bep.py reads Bazel 4.2.3's
"explicitly requested" warning).

1. Checks both sides (missing interpreter, lock that is no lock or lacks torch, interpreter
   without torch) and fetches each side's @pypi (a lock that does not resolve fails here):
   a bad side is one line naming it, exit 2, before any test runs.
2. Runs the targets on each side with `tools/bazel test`, each side in its own output base:
   the pinned side in the workspace's own (so `tools/bazel test //...` results are reused),
   every other side in ~/.cache/torch_tests/gate/<workspace>/<side> (--output-root puts all
   sides there), run from a mirror of the workspace without its bazel-* links (see
   Gate.workspace). Unchanged sources and environments are served from both caches.
3. Compares per test case from each target's test.xml, all shards (tools/gate/compare.py),
   through the build event protocol file of each run (tools/results).
4. Re-runs only the failing cases of every regression twice more on the candidate
   (--runs_per_test=2 --test_filter=... --nocache_test_results): consistent or flaky.
5. Writes report.md and report.json to --out (printed), exit 1 on any regression, else 0.
"""

import argparse
import datetime
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script

from tools.gate import compare, report, sides  # noqa: E402
from tools.results import bep, junit  # noqa: E402

ROOT = sides.ROOT
BAZEL = ROOT / "tools" / "bazel"
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_BAZEL = 1, 2, 3
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
        log_name = f"{side.role}.fetch.log"
        if self.bazel(side, "fetch", ["@pypi//:torch"], log_name) == 0:
            return
        text = (self.out / log_name).read_text(errors="replace")
        raise sides.BadSide(f"{side.role} {side.description} does not resolve: {fetch_error(text)}")

    def run(self, side, targets: list) -> dict:
        events = self.out / f"{side.role}.bep.json"
        args = [
            "--keep_going",
            f"--build_event_json_file={events}",
            *self.args.bazel_arg,
            "--",
            *targets,
        ]
        start = time.monotonic()
        code = self.bazel(side, "test", args, f"{side.role}.bazel.log")
        if code not in RESULT_EXITS or not events.is_file():
            say(f"{side.role}: bazel test exited {code}; see {self.out / side.role}.bazel.log")
            sys.exit(EXIT_BAZEL)
        targets_read = bep.read(events)
        exec_root = bep.exec_root(events)
        cached = sum(t.cached for t in targets_read.values())
        wall = time.monotonic() - start
        say(f"{side.role}: {len(targets_read)} targets in {wall:.1f} s ({cached} cached)")
        return {
            "targets": targets_read,
            "output_base": exec_root.parent.parent if exec_root else self.output_base(side),
        }

    def skip_reason(self, side, output_base, label: str) -> str:
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
        return f"needs {', '.join(needed)}, missing in {side.path}" if needed else ""

    def confirm(self, candidate, regressions: list) -> None:
        """Re-runs each regressed target's failing cases twice more on the candidate."""
        by_target = {}
        for item in regressions:
            by_target.setdefault(item["target"], []).append(item)
        for n, (label, items) in enumerate(sorted(by_target.items())):
            names = sorted({item["case"].split("::")[-1] for item in items if item["case"]})
            events = self.out / f"confirm-{n}.bep.json"
            args = [
                "--keep_going",
                "--runs_per_test=2",
                "--nocache_test_results",
                f"--build_event_json_file={events}",
                *self.args.bazel_arg,
            ]
            if names and all(item["case"] for item in items):
                args.append(f"--test_filter={' or '.join(names)}")
            what = " or ".join(names) or "whole target"
            say(f"confirming {len(items)} regression(s) of {label}: {what}")
            self.bazel(candidate, "test", [*args, "--", label], f"confirm-{n}.bazel.log")
            target = bep.read(events).get(label) if events.is_file() else None
            for item in items:
                item["confirmation"] = _verdict(target, item["case"])


def fetch_error(text: str) -> str:
    """The reason a fetch of @pypi failed: pip's first ERROR line, else pypi.bzl's fail()."""
    bazel_own = re.compile(
        r"fetch of repository|Error fetching|no such package|Analysis of|Build did"
    )
    errors = [e for e in re.findall(r"^ERROR: (.+)$", text, re.M) if not bazel_own.search(e)]
    fails = re.findall(r"^Error in fail: (.+)$", text, re.M)
    return (errors or fails or ["see the fetch log"])[0].strip()


def _verdict(target, case_id) -> dict:
    if target is None:
        return {"verdict": "not confirmed (the re-run produced no result)"}
    failed_runs = 1  # the gate's own run
    if case_id is None and not target.attempts:
        # Nothing ran again (e.g. NO STATUS): as red as before, or not.
        failed_runs += 2 if target.status not in bep.GREEN else 0
    for run in sorted({a.run for a in target.final_attempts()}):
        attempts = [a for a in target.final_attempts() if a.run == run]
        if case_id is None:
            failed = any(a.status != "PASSED" for a in attempts)
        else:
            outcomes = [
                c.outcome
                for a in attempts
                if a.xml and a.xml.is_file()
                for c in junit.cases(a.xml)
                if c.id == case_id
            ]
            # Not in any shard's test.xml: the run did not get as far as the case.
            failed = not outcomes or any(o in compare.BAD for o in outcomes)
        failed_runs += failed
    return {
        "verdict": "consistent" if failed_runs == 3 else "flaky",
        "failed_runs": failed_runs,
        "runs": 3,
    }


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
    args = parser.parse_args(argv)

    gate_sides = [sides.parse("baseline", args.baseline), sides.parse("candidate", args.candidate)]
    gate = Gate(args)
    started = time.monotonic()
    try:
        for side in gate_sides:
            sides.check(side)
        gate.out.mkdir(parents=True, exist_ok=True)
        for side in gate_sides:
            gate.prepare(side)
    except sides.BadSide as error:
        print(f"gate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    runs = {side.role: gate.run(side, args.targets) for side in gate_sides}
    thresholds = compare.Thresholds(
        duration_ratio=args.duration_threshold / 100,
        duration_s=args.duration_min_s,
        rss_ratio=args.rss_threshold / 100,
        rss_mib=args.rss_min_mib,
    )
    snaps = {role: compare.snapshot(run["targets"]) for role, run in runs.items()}
    result = compare.compare(snaps["baseline"], snaps["candidate"], thresholds)
    by_role = {side.role: side for side in gate_sides}
    for item in result["skipped_one_side"]:
        role = "baseline" if item["baseline"] == bep.SKIPPED else "candidate"
        item["reason"] = gate.skip_reason(by_role[role], runs[role]["output_base"], item["target"])
    if result["regressions"]:
        gate.confirm(by_role["candidate"], result["regressions"])

    data = {
        "targets": " ".join(args.targets),
        "thresholds": {
            "durations": f"±{args.duration_threshold:g} % and ≥ {args.duration_min_s:g} s",
            "rss": f"±{args.rss_threshold:g} % and ≥ {args.rss_min_mib:g} MiB",
        },
        "sides": {
            side.role: {
                "spec": f"{side.kind}:{side.path}",
                "description": side.description,
                "output_base": str(runs[side.role]["output_base"]),
                "fingerprint": sides.fingerprint(side, runs[side.role]["output_base"]),
            }
            for side in gate_sides
        },
        "comparison": result,
        "target_status": {
            label: {
                "baseline": _status(snaps["baseline"].get(label)),
                "candidate": _status(snaps["candidate"].get(label)),
                "baseline_rss": getattr(snaps["baseline"].get(label), "peak_rss_mib", None),
                "candidate_rss": getattr(snaps["candidate"].get(label), "peak_rss_mib", None),
            }
            for label in sorted(set(snaps["baseline"]) | set(snaps["candidate"]))
        },
        "wall_s": round(time.monotonic() - started, 1),
    }
    (gate.out / "report.md").write_text(report.markdown(data))
    (gate.out / "report.json").write_text(report.dump_json(data))
    regressions = len(result["regressions"])
    print(f"gate: {regressions} regressions; report: {gate.out / 'report.md'} (and report.json)")
    return EXIT_REGRESSION if regressions else 0


def _status(snap) -> str | None:
    if snap is None:
        return None
    return f"{snap.status} (cached)" if snap.cached else snap.status


if __name__ == "__main__":
    sys.exit(main())
