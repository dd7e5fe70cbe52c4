"""The self-tests' harness: Bazel on a scratch copy of the workspace, outcomes from tools/results.

A check that must edit what Bazel reads (the lock, a test library, the recorded durations)
edits a copy: `Scratch` keeps one per workspace, at a fixed place outside it
(~/.cache/torch_test_selftest/KEY/workspace, KEY a digest of the workspace's path), with its
own output base beside it. Each use brings the copy back to the workspace's files (those git
lists: tracked ones, local edits included, and untracked ones it does not ignore), rewriting
only files whose bytes differ, so the copy's Bazel server state, action cache and @pypi stay
warm from one run to the next. A fresh output base gets the workspace's fetched @pypi (hard
links, with its marker file): Bazel's marker check re-fetches it if anything it was fetched
from differs, so a seed can cost time but never correctness.

Checks that edit nothing use `workspace_bazel()`: the workspace's own Bazel and output base.
Results are judged from each invocation's build event file (tools/results/outcomes.py), never
from Bazel's printed summary.
"""

import contextlib
import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from tools.results import bep, outcomes

ROOT = pathlib.Path(__file__).resolve().parents[2]

CACHE_HOME = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))


class Checks:
    """Counts passed and failed expectations; finish() is the check's exit status."""

    def __init__(self, name: str):
        self.name = name
        self.failures = 0
        self.start = time.monotonic()

    def say(self, title: str) -> None:
        print(f"\n== {title} (at {time.monotonic() - self.start:.0f} s)", flush=True)

    def ok(self, what: str) -> None:
        print(f"ok: {what}", flush=True)

    def fail(self, what: str) -> None:
        print(f"FAIL: {what}", file=sys.stderr, flush=True)
        self.failures += 1

    def expect(self, held: bool, what: str, otherwise: str = "") -> bool:
        if held:
            self.ok(what)
        else:
            self.fail(f"{what} ({otherwise})" if otherwise else what)
        return held

    def finish(self) -> int:
        print(f"{self.name}: {time.monotonic() - self.start:.0f} s")
        if self.failures:
            print(f"{self.name}: {self.failures} check(s) failed", file=sys.stderr)
            return 1
        print(f"{self.name}: all checks passed")
        return 0


class Invocation:
    """One `bazel test`: its targets' outcomes (tools/results/bep.py) and Bazel's output."""

    def __init__(self, events: pathlib.Path, returncode: int, output: str):
        self.events = events
        self.returncode = returncode
        self.output = output
        # No event file: Bazel stopped before writing it; no target has a result.
        self.targets = bep.read(events) if events.is_file() else {}

    def judge(self, checks: Checks, what: str, wrong: str | None) -> bool:
        if wrong is not None and self.events.is_file():
            wrong = "; ".join([wrong, *outcomes.errors(self.events)])
        return checks.expect(wrong is None, what, wrong or "")

    def expect(self, checks: Checks, label: str, status: str, cache: str, what: str) -> bool:
        """LABEL's result is STATUS, and CACHE (cached, fresh or any): outcomes.expect."""
        return self.judge(checks, what, outcomes.expect(self.targets, label, status, cache))

    def expect_shards(self, checks: Checks, label: str, shards: int, status: str, what: str):
        return self.judge(checks, what, outcomes.expect_shards(self.targets, label, shards, status))


class Bazel:
    """tools/bazel of a workspace; on OUTPUT_BASE if given (then --symlink_prefix=/: no bazel-*
    links), else on the workspace's own. Event files and Bazel's output go to LOGS."""

    def __init__(self, workspace: pathlib.Path, logs: pathlib.Path, output_base=None):
        self.workspace = workspace
        self.logs = logs
        self.output_base = output_base

    def argv(self, command: str, *args: str) -> list[str]:
        startup = [f"--output_base={self.output_base}"] if self.output_base else []
        if self.output_base and command in ("build", "test", "run"):
            args = ("--symlink_prefix=/", *args)
        return [str(self.workspace / "tools/bazel"), *startup, command, *args]

    def run(self, command: str, *args: str) -> subprocess.CompletedProcess:
        """The command's result; stdout (a query's answer) apart from stderr (Bazel's log)."""
        return subprocess.run(
            self.argv(command, *args), cwd=self.workspace, capture_output=True, text=True
        )

    def start(self, command: str, *args: str) -> subprocess.Popen:
        """The client in the background, its output discarded (for a check that interrupts it)."""
        return subprocess.Popen(
            self.argv(command, *args),
            cwd=self.workspace,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def test(self, *args: str) -> Invocation:
        events = self.logs / "events.json"
        events.unlink(missing_ok=True)  # never judge an invocation by an earlier one's events
        done = self.run("test", f"--build_event_json_file={events}", *args)
        (self.logs / "bazel.log").write_text(done.stderr + done.stdout)
        return Invocation(events, done.returncode, done.stderr + done.stdout)

    def shutdown(self) -> None:
        subprocess.run(
            self.argv("shutdown"),
            cwd=self.workspace,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def workspace_files(root: pathlib.Path = ROOT) -> list[str]:
    """The files git lists: tracked (as they are now, local edits included) and untracked ones
    it does not ignore; deleted tracked files left out."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    return sorted({f for f in listed.decode().split("\0") if f and (root / f).is_file()})


def sync(source: pathlib.Path, files: list[str], copy: pathlib.Path) -> int:
    """Makes COPY hold exactly FILES of SOURCE; rewrites only files whose bytes or mode differ
    (an unchanged file keeps its stat, so Bazel does not even re-digest it). Returns how many
    files it wrote or removed."""
    changed = 0
    wanted = set(files)
    for name in files:
        src, dst = source / name, copy / name
        mode = src.stat().st_mode & 0o777
        if dst.is_file() and not dst.is_symlink():
            if dst.stat().st_mode & 0o777 == mode and dst.read_bytes() == src.read_bytes():
                continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        shutil.copyfile(src, dst)
        os.chmod(dst, mode)
        changed += 1
    for dirpath, _, filenames in os.walk(copy, topdown=False):
        for name in filenames:
            path = pathlib.Path(dirpath, name)
            if path.relative_to(copy).as_posix() not in wanted:
                path.unlink()
                changed += 1
        if pathlib.Path(dirpath) != copy:
            with contextlib.suppress(OSError):  # not empty: it holds wanted files
                pathlib.Path(dirpath).rmdir()
    return changed


def workspace_output_base(root: pathlib.Path = ROOT) -> pathlib.Path | None:
    """The workspace's own output base (Bazel's, not the scratch's), or None if Bazel cannot say.

    Read from the workspace's bazel-out link (OUTPUT_BASE/execroot/NAME/bazel-out) where there
    is one: `bazel info` would wait for whatever the workspace's server is running (the other
    lane of `python3 -m tools.selftest --parallel`).
    """
    link = root / "bazel-out"
    if link.is_symlink():
        return pathlib.Path(os.readlink(link)).parents[2]
    done = subprocess.run(
        [str(root / "tools/bazel"), "info", "output_base"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return pathlib.Path(done.stdout.strip()) if done.returncode == 0 else None


def seed_pypi(source_base: pathlib.Path | None, output_base: pathlib.Path) -> str:
    """Gives OUTPUT_BASE (its server down) the @pypi that SOURCE_BASE fetched, unless it holds
    that one already: hard links of its files (never written in place: a re-fetch deletes the
    directory and installs anew) and its marker, written last so a half-made copy is never
    taken as fetched. Returns what it did."""
    external = output_base / "external"
    marker = external / "@pypi.marker"
    if source_base is None or not (source_base / "external/@pypi.marker").is_file():
        return "no fetched @pypi to seed from: the scratch fetches its own"
    source_marker = (source_base / "external/@pypi.marker").read_bytes()
    if marker.is_file() and marker.read_bytes() == source_marker:
        return "the scratch's @pypi is the workspace's"
    external.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    subprocess.run(["rm", "-rf", str(external / "pypi")], check=True)  # ~2x shutil.rmtree's speed
    linked = subprocess.run(
        ["cp", "-al", str(source_base / "external/pypi"), str(external / "pypi")],
        capture_output=True,
        text=True,
    )
    if linked.returncode != 0:  # another file system: links impossible, the scratch fetches
        shutil.rmtree(external / "pypi", ignore_errors=True)
        return f"could not link @pypi ({linked.stderr.strip()}): the scratch fetches its own"
    marker.write_bytes(source_marker)
    return f"seeded @pypi from {source_base}"


class Scratch:
    """The scratch copy of the workspace and its Bazel (see the module's docstring).

    with Scratch() as s:  s.root is the copy; s.bazel its tools/bazel; s.tmp a throw-away folder.
    One user at a time (a lock file); the Bazel server is shut down on exit, files are kept.
    seed=False: a check whose fetches fail on purpose needs no working @pypi.
    """

    def __init__(self, home: pathlib.Path | None = None, seed: bool = True):
        self.seed = seed
        key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
        self.home = home or CACHE_HOME / "torch_test_selftest" / key
        self.root = self.home / "workspace"
        self.output_base = self.home / "output_base"

    def __enter__(self) -> "Scratch":
        self.home.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.home / "lock", "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="selftest."))
        self.reset()
        self.bazel = Bazel(self.root, self.tmp, self.output_base)
        self.bazel.shutdown()  # a server left by an interrupted run would hold the old @pypi
        if self.seed:
            print(f"scratch: {seed_pypi(workspace_output_base(), self.output_base)}", flush=True)
        return self

    def reset(self) -> None:
        """Brings the copy back to the workspace's files."""
        self.root.mkdir(exist_ok=True)
        changed = sync(ROOT, workspace_files(), self.root)
        print(f"scratch: {self.root} ({changed} files written or removed)", flush=True)

    def __exit__(self, *exc) -> None:
        self.bazel.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._lock.close()


@contextlib.contextmanager
def workspace_bazel():
    """The workspace's own tools/bazel, its event files and logs in a throw-away folder."""
    logs = pathlib.Path(tempfile.mkdtemp(prefix="selftest."))
    try:
        yield Bazel(ROOT, logs)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
