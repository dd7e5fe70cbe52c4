"""Bazel test results, read from the build event protocol: the one reader of Bazel results here.

    tools/bazel test --build_event_json_file=events.json //...
    targets = bep.read("events.json")        # {label: Target}, in label order
    for target in targets.values():
        target.status, target.cached          # "PASSED", True
        target.final_attempts()               # last attempt of every (shard, run)
        target.xml_files(), target.log_files()

Why the BEP and not bazel-testlogs: the directory holds every layout an output base ever had
(other shard counts, --runs_per_test and --flaky_test_attempts leftovers) and nothing about
targets that never ran; the BEP names exactly this invocation's targets and files.
Hand-written because Bazel 4.2.3 offline has no BEP client library; the JSON form is
newline-delimited BuildEvent messages (proto3 JSON: camelCase, zero values and empty fields
omitted, int64 as strings).

What Bazel 4.2.3 writes (checked on this repository's targets):
- tested target: `targetCompleted` announces `testResult` + `testSummary` children; every
  attempt posts `testResult` {run, shard, attempt} (1-based, also when unsharded) with
  `testActionOutput` file URIs (test.log, test.xml; earlier --flaky_test_attempts under
  `test_attempts/attempt_N.*`), `status`, `testAttemptDurationMillis`, `cachedLocally` (or
  `executionInfo.cachedRemotely`); `testSummary.overallStatus` is PASSED, FLAKY, FAILED, ...
- incompatible target (SKIPPED): `targetCompleted` with `aborted.reason` SKIPPED, no test events.
  Named explicitly (not by a pattern) it is `aborted` with no reason, as a stopped build's; only
  the `progress` event's stderr tells them apart ("Target @//x is incompatible and cannot be
  built, but was explicitly requested."): SKIPPED too, as Bazel 5+ does with
  --skip_incompatible_explicit_targets.
- build failure: `targetCompleted.completed` without `success`, no test events (FAILED TO BUILD).
- build stopped before testing: `aborted` with no reason, or events announced and never
  posted (NO STATUS).
- a test target left out by --test_tag_filters is completed without test children: not listed.
- `buildFinished.finished.finishTimeMillis`: when the invocation ended.
- a test action that failed to execute (remote execution lost it: "ERROR: <BUILD file>: Testing
  //x:t failed: (Exit 34): Remote Execution Failure:" and the next line, "Failed Precondition:
  no live worker in pool ...", tools/remote/README.md): only the `progress` event's stderr says
  why; Target.bazel_error keeps that text (the gate's infra.py reads it).

The files an attempt names live in the output base's testlogs, which the next `bazel test` of
the same target overwrites (or deletes while it runs). read() keeps only files this invocation
wrote: a file written after it ended, or gone, was replaced by a later run, and reading it
(Attempt.xml / .log, Target.xml_files() / .log_files()) raises OutputsReplaced naming it,
rather than reporting another run's cases as this one's.
"""

import dataclasses
import datetime
import json
import pathlib
import re
import urllib.parse
import urllib.request

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["Attempt", "GREEN", "SKIPPED", "Target", "read"]

SKIPPED = "SKIPPED"
NO_STATUS = "NO STATUS"
FAILED_TO_BUILD = "FAILED TO BUILD"
EXPLICIT_INCOMPATIBLE = re.compile(
    r"Target @?(//\S+) is incompatible and cannot be built, but was explicitly requested"
)
# Bazel's error for a test action that failed to run, and the line after it (the cause).
TESTING_FAILED = re.compile(
    r"^ERROR: [^\n]*?: Testing @?(//\S+) failed: ([^\n]*)(?:\n([^\n]*))?", re.M
)
# The prefix of test output URIs in a saved run's events.json (tools/gate/save_run.py).
SAVED_RUN = "file:///saved-run/"
# Statuses of a target whose tests all ran and passed (FLAKY: passed on a retry).
GREEN = ("PASSED", "FLAKY")


class OutputsReplaced(Exception):
    """An invocation's test output was replaced by a later run; the message names it."""


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One test action: a shard of a run, one attempt of it."""

    shard: int
    run: int
    attempt: int
    status: str
    cached: bool
    duration_s: float
    outputs: dict  # name (test.log, test.xml, ...) -> pathlib.Path
    start_s: float = 0.0  # epoch seconds the action started (incl. waiting for a local slot)
    replaced: dict = dataclasses.field(default_factory=dict)  # name -> why it is not this run's

    def output(self, name: str) -> pathlib.Path | None:
        """This invocation's file `name`; raises OutputsReplaced where a later run replaced it."""
        if name in self.replaced:
            raise OutputsReplaced(self.replaced[name])
        return self.outputs.get(name)

    @property
    def xml(self) -> pathlib.Path | None:
        return self.output("test.xml")

    @property
    def log(self) -> pathlib.Path | None:
        return self.output("test.log")


@dataclasses.dataclass
class Target:
    label: str
    status: str = NO_STATUS
    attempts: list = dataclasses.field(default_factory=list)
    shard_count: int = 1
    run_count: int = 1
    tags: tuple = ()  # the target's tags (its variant's among them: tools/gate/variant_plan)
    bazel_error: str = ""  # Bazel's error where its test action failed to run (the docstring)

    @property
    def cached(self) -> bool:
        """Bazel's "(cached)": a result, and every attempt of it came from a cache."""
        done = self.status != NO_STATUS and bool(self.attempts)
        return done and all(a.cached for a in self.attempts)

    @property
    def green(self) -> bool:
        return self.status in GREEN

    def final_attempts(self) -> list[Attempt]:
        """The last attempt of every (shard, run), by shard then run."""
        last = {}
        for a in self.attempts:
            key = (a.shard, a.run)
            if key not in last or a.attempt > last[key].attempt:
                last[key] = a
        return [last[k] for k in sorted(last)]

    def xml_files(self) -> list[pathlib.Path]:
        return [a.xml for a in self.final_attempts() if a.xml and a.xml.is_file()]

    def log_files(self) -> list[pathlib.Path]:
        return [a.log for a in self.final_attempts() if a.log and a.log.is_file()]

    @property
    def duration_s(self) -> float:
        """Seconds of test actions behind this result (all final shards and runs)."""
        return sum(a.duration_s for a in self.final_attempts())


def _path(uri: str) -> pathlib.Path:
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        # bytestream:// (remote execution without downloads) has no local file.
        raise ValueError(f"not a local file: {uri}")
    return pathlib.Path(urllib.request.url2pathname(parsed.path))


def local_path(uri: str) -> pathlib.Path | None:
    """The local file a test output's URI names, or None (not a file:// URI)."""
    try:
        return _path(uri)
    except ValueError:
        return None


def _outputs(files: list) -> dict:
    outputs = {}
    for f in files:
        try:
            outputs[f["name"]] = _path(f["uri"])
        except ValueError:
            continue
    return outputs


def _status_name(overall: str) -> str:
    return overall.replace("_", " ")  # NO_STATUS -> NO STATUS, as Bazel prints it


def parse(lines) -> dict[str, Target]:
    """Targets from BEP JSON lines (see the module docstring)."""
    targets: dict[str, Target] = {}
    is_test: set[str] = set()  # configured with a test size
    tags: dict[str, tuple] = {}  # a test's tags, as configured
    announced: set[str] = set()  # a testSummary child was announced: Bazel meant to test it
    summarized: set[str] = set()
    incompatible: set[str] = set()  # named explicitly, incompatible with the platform
    patterns: list[str] = []  # the invocation's target patterns
    bazel_errors: dict[str, str] = {}  # label -> Bazel's error for its test action

    def target(label: str) -> Target:
        return targets.setdefault(label, Target(label))

    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        kind, event_id = next(iter(event["id"].items()))
        if kind == "pattern":
            patterns += event_id.get("pattern", [])
        elif kind == "progress":
            stderr = event["progress"].get("stderr", "")
            incompatible.update(EXPLICIT_INCOMPATIBLE.findall(stderr))
            for label, error, cause in TESTING_FAILED.findall(stderr):
                bazel_errors.setdefault(label, f"{error} {cause}".strip())
        elif kind == "targetConfigured":
            configured = event.get("configured", {})
            if "testSize" in configured:
                is_test.add(event_id["label"])
                tags[event_id["label"]] = tuple(configured.get("tag", []))
        elif kind == "targetCompleted":
            label = event_id["label"]
            if any("testSummary" in child for child in event.get("children", [])):
                announced.add(label)
            if label not in is_test:
                continue  # a library or binary, not a test
            if "aborted" in event:
                reason = event["aborted"].get("reason", "")
                target(label).status = SKIPPED if reason == SKIPPED else NO_STATUS
            elif not event.get("completed", {}).get("success"):
                target(label).status = FAILED_TO_BUILD
        elif kind == "testResult" and "testResult" in event:
            result = event["testResult"]
            execution = result.get("executionInfo", {})
            target(event_id["label"]).attempts.append(
                Attempt(
                    shard=int(event_id.get("shard", 1)),
                    run=int(event_id.get("run", 1)),
                    attempt=int(event_id.get("attempt", 1)),
                    status=result.get("status", NO_STATUS),
                    cached=bool(result.get("cachedLocally") or execution.get("cachedRemotely")),
                    duration_s=int(result.get("testAttemptDurationMillis", 0)) / 1000,
                    outputs=_outputs(result.get("testActionOutput", [])),
                    start_s=int(result.get("testAttemptStartMillisEpoch", 0)) / 1000,
                )
            )
        elif kind == "testSummary":
            label = event_id["label"]
            summary = event.get("testSummary")
            t = target(label)
            summarized.add(label)
            # An aborted summary (the build stopped) carries no status: NO STATUS.
            t.status = _status_name(summary["overallStatus"]) if summary else NO_STATUS
            if summary:
                t.shard_count = int(summary.get("shardCount", 1))
                t.run_count = int(summary.get("runCount", 1))

    # Announced but never summarized: the build stopped before the test finished.
    for label in announced - summarized:
        target(label).status = NO_STATUS
    for label in incompatible & targets.keys():
        if targets[label].status == NO_STATUS and not targets[label].attempts:
            targets[label].status = SKIPPED
    # Targets completed without test children (e.g. left out by --test_tag_filters) were never
    # added: Bazel does not list them either. Nor is a target the patterns exclude, which Bazel
    # 4.2.3 still reports SKIPPED when it is incompatible (`//... -//x:t` on a host without t's
    # package).
    for label, target_tags in tags.items():
        if label in targets:
            targets[label].tags = target_tags
    for label, error in bazel_errors.items():
        if label in targets:
            targets[label].bazel_error = error
    return {k: t for k, t in sorted(targets.items()) if not excluded(k, patterns)}


def excluded(label: str, patterns: list[str]) -> bool:
    """Whether a negative pattern (`-//pkg:t`, `-//pkg:all`, `-//pkg/...`) leaves `label` out."""
    package, _, _ = label.partition(":")
    for pattern in patterns:
        if not pattern.startswith("-"):
            continue
        negative = pattern[1:]
        if negative.endswith("/..."):
            root = negative.removesuffix("/...")
            if package == root or package.startswith(root + "/"):
                return True
        elif negative in (label, package + ":all", package + ":*"):
            return True
    return False


def exec_root(path) -> pathlib.Path | None:
    """The invocation's execution root (its output base is two levels up), from `workspace`."""
    with open(path) as f:
        for line in f:
            event = json.loads(line) if line.strip() else {}
            if "workspace" in event.get("id", {}):
                root = event.get("workspaceInfo", {}).get("localExecRoot")
                return pathlib.Path(root) if root else None
    return None


def finished_s(path) -> float:
    """Epoch seconds the invocation ended: its buildFinished event, else the file's mtime (a
    build event file is written up to the end)."""
    with open(path) as f:
        for line in f:
            if '"buildFinished"' in line:
                event = json.loads(line)
                millis = event.get("finished", {}).get("finishTimeMillis")
                if millis:
                    return int(millis) / 1000
    return pathlib.Path(path).stat().st_mtime


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds).isoformat(sep=" ", timespec="seconds")


def keep_own_outputs(targets: dict, events, ended_s: float) -> dict:
    """Targets whose attempts name only files this invocation wrote (see the module docstring)."""
    for target in targets.values():
        attempts = []
        for a in target.attempts:
            outputs, replaced = {}, {}
            for name, file in a.outputs.items():
                try:
                    written = file.stat().st_mtime
                except FileNotFoundError:
                    written = None
                if written is not None and written <= ended_s:
                    outputs[name] = file
                    continue
                what = f"{target.label} shard {a.shard} run {a.run} attempt {a.attempt}: {file}"
                if written is None:
                    why = "is gone"
                else:
                    why = f"was written at {_stamp(written)}, after the invocation ended"
                replaced[name] = (
                    f"{what} {why} (build event file {events}, ended {_stamp(ended_s)}): a "
                    "later `bazel test` replaced this invocation's file; read the later "
                    "invocation's build event file, or run the tests again"
                )
            attempts.append(dataclasses.replace(a, outputs=outputs, replaced=replaced))
        target.attempts = attempts
    return targets


def read_saved(directory) -> dict[str, Target]:
    """A run saved by tools/gate/save_run.py: its events.json names its files under SAVED_RUN,
    which is `directory` wherever it now is (its files were checked when it was saved)."""
    root = urllib.request.pathname2url(str(pathlib.Path(directory).resolve()))
    with open(pathlib.Path(directory) / "events.json") as f:
        return parse(line.replace(SAVED_RUN, f"file://{root}/") for line in f)


def read(path) -> dict[str, Target]:
    """The invocation's targets; files a later run replaced raise OutputsReplaced when read."""
    with open(path) as f:
        targets = parse(f)
    return keep_own_outputs(targets, path, finished_s(path))
