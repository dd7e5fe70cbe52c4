"""The suite in host-interpreter mode: plain pytest serial vs default Bazel vs the bound.

    tools/bazel setup --host-python=$(command -v python3)    # once per checkout
    python3 bench/host_suite.py

For GPU hosts whose image ships torch (no pinned @pypi, maybe no Bazel: the bundle). One run of
each, cold kernel caches (each phase gets an empty one), ratios printed and written to
RESULTS_DIR/host_suite.md (default bench/results):

  memo     one process compiles on the CPU once, so inductor's vector-ISA probes are kept for
           this host (tools/runner/process/vec_isa_memo.py), as on any host that has run a test:
           the runs below start from them (compare
           'memo-off=--test_env=TORCH_TEST_VEC_ISA_MEMO=off'); its seconds are the one-time cost.
           It runs beside the build (both unmeasured one-time costs)
  record   only if a GPU target of the suite (that this host can run and --tag-filters
           selects) has no peak GPU memory in tools/test_times.bzl: the selected GPU targets
           once through Bazel, then tools/update_test_times.py, so the
           default run below decides GPU sharing from measured peaks (tools/runner/gpu_share.py).
           The updated tools/test_times.bzl is copied to RESULTS_DIR: commit it.
  bazel    `tools/bazel test --nocache_test_results //dynamo_tests/... //distributed_tests/...`:
           the defaults (thread budget, GPU sharing, shards), nothing else set. Its per-case
           seconds and GPU peaks then go through tools/update_test_times.py, and the result is
           copied to RESULTS_DIR/test_times.bzl: this host's record, to commit if it should
           decide shard packing and GPU sharing from now on (tools/test_times.bzl itself is
           left as it was, so --compare runs pack and share as the defaults did).
  pytest   the same targets' tests through plain pytest, one (file, variant) after another, in
           the same interpreter, only the targets Bazel ran (not those it SKIPPED), with the
           bytecode cache Bazel's tests get (tools/runner/bytecode.py)
  alone    the --alone K longest cases (default 3) of the pytest run and of Bazel's default
           run, each again alone in a fresh plain pytest process (the faster of two runs),
           uncontended, kernel caches cold (emptied before each run) as in the Bazel run the
           bound is set against: what any process that runs such a case costs at least,
           whatever else it runs: its interpreter start, imports, collection, its kernels'
           compiles and its first compile's per-process work (on the torch 2.11 image mostly
           inductor's vector-ISA check), which plain pytest pays once per file, inside
           whichever case compiles first, and each Bazel shard pays again. Each case then
           runs once more with the kernels its cold runs left (warm; --no-warm skips it),
           reported beside it and not part of the bound: the term as it was measured before
           2026-11-28, which sat below anything a cold run can reach where the case mostly
           compiles kernels
           (bench/results/case_alone_2026-11-28_nvidia-h200.md: a cold run cannot take less
           than the case's cold compiles, so only a cold term is a lower bound on it)
  bound    max(longest test case + one interpreter start, longest case alone,
               GPU capacity the tests occupy / GPUs, whole-GPU work per GPU set,
               all test-case seconds / cores), test-case seconds from the uncontended pytest run.
           A test occupies its variant's GPUs for its seconds, each GPU wholly or by the share
           the default policy leased it in the Bazel run (the share each shard's record holds,
           e.g. 2 of 16 slots): only tests that cannot share count one after another, as the policy
           runs them. Tests of N GPUs that leased them whole run at most GPUs // N at once
           (one per disjoint set of N GPUs), so their seconds / (GPUs // N) is a bound too,
           tighter than GPU capacity / GPUs where N does not divide the host's GPUs.

--tag-filters FILTERS measures only what it selects (Bazel's --test_tag_filters, e.g. multi_gpu:
the 2-, 4- and 8-GPU variants; -multi_gpu: everything else): every Bazel run gets it, and plain
pytest and the bound cover only the targets Bazel ran. On a multi-GPU host the whole suite's
plain pytest, one multi-GPU file after another, outlasts a 10-minute call.

--reuse-defaults: the Bazel defaults' run is the last one this RESULTS_DIR holds (its build
events, wall and exit, and its test logs, which a later `tools/bazel test` replaces), not a new
one: a 10-minute call runs `--no-pytest --alone 0` (build, memo, record, defaults), and the next
call on the same warm host `--reuse-defaults` (plain pytest, alone, the bound), each within its
limit where plain pytest of multi-GPU files, one after another, and Bazel's run do not fit one.
--reuse-pytest likewise takes plain pytest's run (its per-case seconds, kept in RESULTS_DIR as
host_suite_pytest.json) from the last run, so a third call runs only the cases alone and the
bound, where the second call's plain pytest and cases alone outlast one call
(bench/results/host_suite_2026-11-26_nvidia-h100-x1.md).

--samples N (issue 53: the ratio as the median of three): after the run above, N - 1 more
alternating pairs of a cold defaults run and the case that set the alone term, run alone once
(cold); the report adds a row per sample and their median ratio. One 1-GPU host's call fits
`--no-pytest --alone 2 --no-warm --samples 3` (the alone term is the bound's largest there;
which case is the longest of a run changes from machine to machine, so one case alone can
leave out the term that sets the bound: bench/results/host_suite_2026-11-28_nvidia-h200.md).

--compare NAME=FLAGS (repeatable) adds one more cold Bazel run with those flags after the
defaults, on the same record and bound: a lever's before/after side by side. --no-pytest skips
plain pytest (quick experiments): the bound is then its alone term, run for the longest cases
of Bazel's default run (--alone 0: no bound at all).

Goals (issues 16 and 26): bazel <= 1.15 x bound and <= 0.35 x pytest on a 16-core 1-GPU host.

Environment (smoke tests): HOST_SUITE_TARGETS (space-separated, default the two packages),
BAZEL_STARTUP (e.g. --output_base=/tmp/ob, to keep a pinned output base apart).
"""

import argparse
import concurrent.futures
import dataclasses
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import plain_env  # noqa: E402
from tools import update_test_times  # noqa: E402
from tools.hardware.probe import host_gpu_count  # noqa: E402
from tools.hardware.table import table  # noqa: E402
from tools.python import host_mode  # noqa: E402
from tools.results import bep, facts, junit  # noqa: E402
from tools.runner.process import kernel_cache, private_dirs  # noqa: E402

RESULTS = pathlib.Path(os.environ.get("RESULTS_DIR", ROOT / "bench" / "results"))
BAZEL = str(ROOT / "tools" / "bazel")
KERNEL_CACHE = pathlib.Path(kernel_cache.ROOT)
TARGETS = os.environ.get("HOST_SUITE_TARGETS", "//dynamo_tests/... //distributed_tests/...").split()
STARTUP = os.environ.get("BAZEL_STARTUP", "").split()
VARIANT_GPUS = {name: spec["gpus"] for name, spec in table()["VARIANTS"].items()}
# Target suffix -> variant, from the variant table; longest first ("_multi_gpu" before "_gpu").
SUFFIXES = dict(
    sorted(
        ((spec["suffix"], name) for name, spec in table()["VARIANTS"].items() if spec["suffix"]),
        key=lambda pair: -len(pair[0]),
    )
)


def log(message: str) -> None:
    print(f"[host_suite {time.strftime('%H:%M:%S')}] {message}", flush=True)


def timed(cmd, **kwargs):
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kwargs)
    return proc, time.monotonic() - start


def cold_kernel_cache() -> None:
    shutil.rmtree(KERNEL_CACHE, ignore_errors=True)
    private_dirs.ensure(KERNEL_CACHE)  # as the runner makes it: private, or tests refuse it


def bazel(command: str, *args):
    # On another output base, no bazel-* links: the workspace's must keep pointing at its own
    # output base, or its next `//...` loads the other one's tree as packages.
    links = ["--symlink_prefix=/"] if STARTUP and command in ("build", "test") else []
    return timed([BAZEL, *STARTUP, command, *links, *args])


def variant_of(label: str) -> tuple[str, str]:
    """(source, variant) of a torch_test target: //pkg:test_x_gpu -> (pkg/test_x.py, gpu)."""
    package, name = label.removeprefix("//").split(":")
    for suffix, variant in SUFFIXES.items():
        if name.endswith(suffix):
            return f"{package}/{name.removesuffix(suffix)}.py", variant
    return f"{package}/{name}.py", "cpu"


def tag_query(tag_filters: str, universe: str) -> str:
    """A query for the tests of `universe` that --test_tag_filters=`tag_filters` runs: any of
    its tags (all tests if none), none of its -tags."""

    def tagged(tag: str) -> str:
        # A tag is an element of the printed list "[gpu, multi_gpu, nccl]", not a substring.
        return f'attr(tags, "[\\[ ]{tag}[,\\]]", {universe})'

    tags = [t for t in tag_filters.split(",") if t]
    wanted = [tagged(t) for t in tags if not t.startswith("-")]
    query = " + ".join(wanted) if wanted else universe
    for tag in tags:
        if tag.startswith("-"):
            query = f"({query}) - {tagged(tag[1:])}"
    return query


def query_tests(query: str) -> list[str]:
    proc, _ = bazel("query", query)
    if proc.returncode:
        raise RuntimeError(f"bazel query {query} failed: {proc.stderr[-2000:]}")
    return [line for line in proc.stdout.split() if line.startswith("//")]


def suite_tests() -> list[str]:
    return query_tests(f"tests({' + '.join(TARGETS)})")


def gpu_targets(tag_filters: str = "") -> list[str]:
    return query_tests(tag_query(tag_filters, f"attr(tags, gpu, tests({' + '.join(TARGETS)}))"))


def record(events: pathlib.Path) -> str:
    """tools/update_test_times.py on a run's build events; the result copied to RESULTS."""
    update = subprocess.run(
        [sys.executable, "tools/update_test_times.py", str(events)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    shutil.copy(update_test_times.TIMES, RESULTS / "test_times.bzl")
    return update.stdout.strip() or update.stderr.strip()


def fill_vec_isa_memo(python: str) -> str:
    """Inductor's vector-ISA probes kept for this host (tools/runner/process/vec_isa_memo.py), as
    any
    host that has run a test before keeps them: every run below starts from them, and this
    is their one-time cost."""
    compile_once = (
        "from tools.runner.process import vec_isa_memo; vec_isa_memo.watch(); import torch; "
        "torch.compile(lambda x: x.sin(), backend='inductor')(torch.ones(8)); "
        "print(vec_isa_memo.summary())"
    )
    env = plain_env.without_compiler_variables(os.environ)  # the tests' compiler's probes
    env["TORCHINDUCTOR_CACHE_DIR"] = str(KERNEL_CACHE / "memo_fill")
    proc, wall = timed([python, "-c", compile_once], env=env)
    if proc.returncode:
        raise RuntimeError(f"filling the vec-ISA memo failed: {proc.stderr[-2000:]}")
    return f"{wall:.1f} s ({proc.stdout.strip()})"


def build_beside_memo(python: str, *args: str, memo: bool = True):
    """`bazel build ARGS` and, beside it, the vector-ISA memo's fill (unless not `memo`):
    (build process, its wall, the memo's line). Both are one-time costs no run measures, and
    neither reads what the other writes: side by side, a device call has a minute more."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as side:
        filling = side.submit(fill_vec_isa_memo, python) if memo else None
        build, wall = bazel("build", *args)
        return build, wall, filling.result() if filling else "not needed"


def record_peaks_if_missing(tag_filters: str) -> str:
    """The selected GPU targets once, if one that this host can run has no recorded peak."""
    _, peaks = update_test_times.read()
    gpus = host_gpu_count()
    runnable = [t for t in gpu_targets(tag_filters) if VARIANT_GPUS[variant_of(t)[1]] <= gpus]
    missing = [t for t in runnable if t not in peaks]
    if not missing or gpus == 0:
        return "peaks recorded already" if not missing else "no GPU"
    log(f"record: no GPU peak for {missing}; running the selected GPU targets once")
    cold_kernel_cache()
    events = RESULTS / "host_suite_record.bep.json"
    proc, wall = bazel(
        "test",
        "--nocache_test_results",
        f"--test_tag_filters={tag_filters or 'gpu'}",
        f"--build_event_json_file={events}",
        *TARGETS,
    )
    updated = record(events)
    _, peaks = update_test_times.read()
    got = {t: peaks.get(t) for t in missing}
    log(f"record: {wall:.0f} s, peaks {got}; {updated}")
    return f"recorded in {wall:.0f} s: {json.dumps(got)} (commit tools/test_times.bzl)"


class Case(NamedTuple):
    label: str
    variant: str
    seconds: float
    node_id: str


def declared_variants(every: list[str]) -> dict[str, list[str]]:
    """Each source's variants: those of all its targets (SKIPPED ones and those --tag-filters
    leaves out too), as torch_test declares them to the plugin."""
    declared: dict[str, list[str]] = {}
    for label in every:
        source, variant = variant_of(label)
        declared.setdefault(source, []).append(variant)
    return declared


def pytest_command(python: str) -> list[str]:
    """Plain pytest as the benches run it: quiet, the session plugin, no cache provider."""
    return [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "tools.runner.session.plugin",
        "-p",
        "no:cacheprovider",
    ]


def run_pytest(label: str, declared, python: str, kernels: pathlib.Path, *args: str):
    """One plain pytest process, as `label`'s variant runs it: (process, wall, summary line)."""
    source, variant = variant_of(label)
    caches = KERNEL_CACHE / "pytest"  # bytecode here, compiled once (bench/plain_env.py)
    env = plain_env.plain_pytest_env(
        variant,
        str(ROOT),
        caches,
        python,
        kernels=kernels,
        declared_variants=declared[source],
    )
    cmd = pytest_command(python)
    proc, wall = timed([*cmd, *args], env=env)
    return proc, wall, (proc.stdout.strip().splitlines() or ["?"])[-1]


def plain_pytest(ran: list[str], declared, python: str):
    """Plain pytest, one (file, variant) of `ran` after another; per-case seconds from JUnit."""
    cold_kernel_cache()
    rows, cases = [], []
    scratch = RESULTS / "host_suite_junit"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for index, label in enumerate(ran):
        source, variant = variant_of(label)
        xml = scratch / f"{index}.xml"
        junit_args = [f"--junitxml={xml}", "-o", "junit_family=xunit1"]  # node ids, as Bazel's
        _, wall, summary = run_pytest(
            label, declared, python, KERNEL_CACHE / "pytest", source, *junit_args
        )
        rows.append((label, variant, wall, summary))
        log(f"pytest {source} [{variant}]: {wall:.1f} s, {summary}")
        if xml.exists():
            cases += [Case(label, variant, c.time_s, c.node_id) for c in junit.cases(xml)]
    return rows, cases


def _pytest_file() -> pathlib.Path:
    return RESULTS / "host_suite_pytest.json"


def save_pytest(rows, cases) -> None:
    """Plain pytest's run kept in RESULTS for --reuse-pytest."""
    _pytest_file().write_text(json.dumps({"rows": rows, "cases": [list(c) for c in cases]}))


def last_pytest():
    """The plain pytest run save_pytest kept last in RESULTS (--reuse-pytest)."""
    if not _pytest_file().is_file():
        raise SystemExit(
            f"no saved plain pytest run in {RESULTS} ({_pytest_file().name}); "
            "with --reuse-pytest, run without it first"
        )
    saved = json.loads(_pytest_file().read_text())
    return [tuple(row) for row in saved["rows"]], [Case(*c) for c in saved["cases"]]


def bazel_cases(targets: dict[str, bep.Target]) -> list[Case]:
    """Per-case seconds of a Bazel run, from its shards' test.xml."""
    return [
        Case(label, variant_of(label)[1], case.time_s, case.node_id)
        for label, target in targets.items()
        for xml in target.xml_files()
        for case in junit.cases(xml)
    ]


# A bound is a minimum: one sample of a 60 s case ran slower alone than the same case in a
# loaded Bazel shard on the same host, so each case runs alone this many times.
ALONE_RUNS = 2
# The cases alone compile into a folder of their own, emptied before each cold run.
ALONE_KERNELS = KERNEL_CACHE / "alone"


class Alone(NamedTuple):
    cold: float  # the fastest cold run: the bound's term
    warm: float  # one run on the kernels the cold runs left (nan where not run)


def run_alone(
    label: str,
    node_id: str,
    declared,
    python: str,
    state: str,
) -> float:
    """One fresh plain pytest process that runs only `node_id`, as `label`'s variant runs it,
    its kernel caches in ALONE_KERNELS `state`: cold (emptied first) or warm (as the run before
    left them)."""
    if state == "cold":
        shutil.rmtree(ALONE_KERNELS, ignore_errors=True)
    proc, wall, summary = run_pytest(label, declared, python, ALONE_KERNELS, node_id)
    log(f"alone {node_id} [{variant_of(label)[1]}], {state}: {wall:.1f} s, {summary}")
    if proc.returncode:
        raise RuntimeError(f"{node_id} alone failed: {summary}")
    return wall


def case_alone(
    case: Case, declared, python: str, runs: int = ALONE_RUNS, warm: bool = True
) -> Alone:
    """The fastest of `runs` cold runs of this case alone, then one warm run (if `warm`)."""

    def alone(state: str) -> float:
        return run_alone(case.label, case.node_id, declared, python, state)

    cold = min(alone("cold") for _ in range(runs))
    return Alone(cold, alone("warm") if warm else math.nan)


def longest_alone(runs: dict[str, list[Case]], count: int, alone) -> list[list]:
    """Rows [node id, seconds in each run..., Alone] for the `count` longest cases of each run
    (a case counted once), each run alone by `alone(case)`, longest cold alone first."""
    seconds = {name: {c.node_id: c.seconds for c in cases} for name, cases in runs.items()}
    chosen: dict[str, Case] = {}
    for cases in runs.values():
        for case in sorted(cases, key=lambda c: -c.seconds)[:count]:
            chosen.setdefault(case.node_id, case)
    rows = [
        [node_id, *[seconds[name].get(node_id, math.nan) for name in runs], alone(case)]
        for node_id, case in chosen.items()
    ]
    return sorted(rows, key=lambda row: -row[-1].cold)


def interpreter_start(python: str) -> float:
    start = time.monotonic()
    subprocess.run([python, "-c", "import torch, pytest"], check=True, cwd=ROOT)
    return time.monotonic() - start


def runner_lines(targets: dict[str, bep.Target], pattern: str) -> list[str]:
    """The runner's lines for people that contain `pattern` (shown, never parsed)."""
    return [
        f"{label}: {line}"
        for label, target in targets.items()
        for log in target.log_files()
        for line in log.read_text(errors="replace").splitlines()
        if pattern in line
    ]


def leases(targets: dict[str, bep.Target]) -> tuple[dict[str, float], list[str]]:
    """Each GPU target's share of its leased GPUs, the largest of its shards' (1: whole), and
    each shard's lease as a line, from the runner's records."""
    share: dict[str, float] = {}
    lines = []
    for label, target in targets.items():
        for attempt in target.final_attempts():
            rec = facts.of(attempt)
            if rec is None or rec.lease is None:
                continue
            share[label] = max(share.get(label, 0.0), rec.lease.share)
            row = facts.lease_row(rec)
            lines.append(
                f"{label} shard {attempt.shard}: GPUs {row['gpus']} after {row['wait_s']:.1f} s "
                f"({row['share']})"
            )
    return share, lines


def gpu_bound(share: dict[str, float], cases, rows, start: float, gpus: int) -> float:
    """Seconds the GPUs need at least for the pytest cases, under the leases Bazel's run took
    (`share`, from leases()): the larger of all GPU-seconds / GPUs and, for each GPU count N,
    the seconds of the N-GPU tests that leased whole GPUs / (GPUs // N), the disjoint sets of
    N GPUs that can run them at once.

    A target's share is the largest any of its shards held (a lower share would only lower
    the bound's GPU term further; the largest keeps it a bound of what the policy did).
    """
    # Each GPU target's cases, and one interpreter start per target.
    work = [(label, VARIANT_GPUS[variant], seconds) for label, variant, seconds, _ in cases]
    work += [(label, VARIANT_GPUS[variant], start) for label, variant, _, _ in rows]
    work = [(label, n, seconds) for label, n, seconds in work if 0 < n <= gpus]
    capacity = sum(seconds * n * share.get(label, 1.0) for label, n, seconds in work) / gpus
    whole: dict[int, float] = {}
    for label, n, seconds in work:
        if share.get(label, 1.0) >= 1.0:
            whole[n] = whole.get(n, 0.0) + seconds
    per_set = max((seconds / (gpus // n) for n, seconds in whole.items()), default=0.0)
    return max(capacity, per_set)


@dataclasses.dataclass(frozen=True)
class Phase:
    """One cold `tools/bazel test` of the suite: the defaults, or a lever's flags added."""

    name: str
    flags: str
    wall: float
    code: int
    targets: dict[str, bep.Target]
    events: pathlib.Path


def bazel_phase(suffix: str, name: str, flags: str, selection: list[str]) -> Phase:
    """SUFFIX names its files in RESULTS (host_suite{SUFFIX}.bep.json, ..._bazel.log);
    `selection`: the --tag-filters flags of every run."""
    cold_kernel_cache()
    events = RESULTS / f"host_suite{suffix}.bep.json"
    run, wall = bazel(
        "test",
        "--nocache_test_results",
        f"--build_event_json_file={events}",
        *selection,
        *flags.split(),
        *TARGETS,
    )
    (RESULTS / f"host_suite{suffix}_bazel.log").write_text(run.stdout + run.stderr)
    log(f"bazel {flags or 'default'}: {wall:.1f} s, exit {run.returncode}")
    _phase_file(suffix).write_text(
        json.dumps({"name": name, "flags": flags, "wall": wall, "code": run.returncode})
    )
    return last_phase(suffix)


def _phase_file(suffix: str) -> pathlib.Path:
    return RESULTS / f"host_suite{suffix}.phase.json"


def last_phase(suffix: str) -> Phase:
    """The run bazel_phase(SUFFIX, ...) made last in RESULTS (also --reuse-defaults)."""
    events = RESULTS / f"host_suite{suffix}.bep.json"
    if not (_phase_file(suffix).is_file() and events.is_file()):
        # After a fresh run, Bazel wrote no build events; with --reuse-defaults, none ran yet.
        raise SystemExit(
            f"no saved Bazel run in {RESULTS} ({events.name}, {_phase_file(suffix).name}); "
            "with --reuse-defaults, run without it first"
        )
    ran = json.loads(_phase_file(suffix).read_text())
    return Phase(**ran, targets=bep.read(events), events=events)


def shard_rows(targets: dict[str, bep.Target]) -> list[str]:
    return [
        "| target | shard | s |",
        "| --- | ---: | ---: |",
        *[
            f"| `{label}` | {a.shard} of {target.shard_count} | {a.duration_s:.1f} |"
            for label, target in sorted(targets.items())
            for a in target.final_attempts()
        ],
    ]


class Sample(NamedTuple):
    defaults: float  # a cold Bazel run's wall
    bound: float  # the bound, its alone term from the run right after it

    @property
    def ratio(self) -> float:
        return self.defaults / self.bound


def next_sample(index: int, node_id, runs, others, selection, declared, python) -> Sample:
    """Sample INDEX (2, 3, ...): a cold defaults run, then the case that set the alone term
    once alone, so the defaults and the bound alternate on the same host (its noise shared)."""
    phase = bazel_phase(f"_sample{index}", f"defaults #{index}", "", selection)
    if phase.code:
        raise RuntimeError(f"sample {index}: bazel exit {phase.code}")
    if not node_id:
        return Sample(phase.wall, max(others, default=math.nan))
    case = next(c for cases in runs.values() for c in cases if c.node_id == node_id)
    alone = run_alone(case.label, case.node_id, declared, python, "cold")
    return Sample(phase.wall, max([*others, alone]))


def sample_rows(samples: list[Sample]) -> list[str]:
    if len(samples) < 2:
        return []
    median = statistics.median(sample.ratio for sample in samples)
    return [
        "| sample | defaults s | bound s | / bound |",
        "| ---: | ---: | ---: | ---: |",
        *[
            f"| {index} | {s.defaults:.1f} | {s.bound:.1f} | {s.ratio:.2f} |"
            for index, s in enumerate(samples, 1)
        ],
        "",
        f"- median of {len(samples)} alternating samples: {median:.2f}x the bound "
        "(sample 1 is the table above; later samples run the case alone once, cold)",
        "",
    ]


def parse_options(argv: list[str]):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="one more cold Bazel run with these flags (space-separated), e.g. "
        "'one-worker=--test_env=TORCHINDUCTOR_COMPILE_THREADS=1': a lever's before/after",
    )
    parser.add_argument(
        "--tag-filters",
        default="",
        metavar="FILTERS",
        help="measure only these targets (Bazel's --test_tag_filters, e.g. multi_gpu), in every "
        "Bazel run, plain pytest and the bound",
    )
    parser.add_argument(
        "--no-pytest", action="store_true", help="Bazel runs only: no plain pytest, no bound"
    )
    parser.add_argument(
        "--reuse-defaults",
        action="store_true",
        help="take the defaults' run from the last run in RESULTS_DIR (on the same host)",
    )
    parser.add_argument(
        "--reuse-pytest",
        action="store_true",
        help="take plain pytest's run from the last run in RESULTS_DIR (on the same host)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=1,
        metavar="N",
        help="N alternating samples of (defaults, the longest case alone): the ratio reported "
        "is their median",
    )
    parser.add_argument(
        "--alone",
        type=int,
        default=3,
        metavar="K",
        help="the bound runs the K longest cases again, each alone in a fresh process",
    )
    parser.add_argument(
        "--no-warm",
        action="store_true",
        help="skip each case's warm run alone (reported only, not part of the bound)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse_options(sys.argv[1:] if argv is None else argv)
    python = host_mode.host_python()
    if not python:
        print(
            "host mode only: `tools/bazel setup --host-python=PATH` (or TORCH_TEST_PYTHON)",
            file=sys.stderr,
        )
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    cores, gpus = os.cpu_count() or 1, host_gpu_count()
    log(f"{cores} cores, {gpus} GPUs, python {python}")
    selection = [f"--test_tag_filters={options.tag_filters}"] if options.tag_filters else []
    build_selection = [f"--build_tag_filters={options.tag_filters}"] if options.tag_filters else []
    build, build_wall, memo = build_beside_memo(python, *build_selection, *TARGETS)
    if build.returncode:
        print(build.stderr[-3000:], file=sys.stderr)
        return 1
    log(f"build (server start, analysis, runfiles): {build_wall:.0f} s")
    log(f"vec-ISA memo, beside the build: {memo}")
    if options.reuse_defaults:
        recorded = "defaults reused from the last run"
        defaults = last_phase("")
        log(f"bazel default: reused, {defaults.wall:.1f} s, exit {defaults.code}")
    else:
        recorded = record_peaks_if_missing(options.tag_filters)
        defaults = bazel_phase("", "defaults", "", selection)
    targets, bazel_wall = defaults.targets, defaults.wall
    results = {label: target.status for label, target in targets.items()}
    ran = sorted(label for label, status in results.items() if status != bep.SKIPPED)
    log(f"bazel default results: {results}")
    # Read before a lever's run replaces the test logs and XML they come from.
    shares, lease_lines = leases(targets)
    runner = runner_lines(targets, "torch_test threads:") + lease_lines
    default_cases = bazel_cases(targets)
    committed = update_test_times.TIMES.read_text()
    log(f"this host's record: {record(defaults.events)}")
    update_test_times.TIMES.write_text(committed)  # the levers run on the defaults' record
    levers = [
        bazel_phase(f"_{index}", *entry.partition("=")[::2], selection)
        for index, entry in enumerate(options.compare)
    ]

    declared = declared_variants(suite_tests())
    if options.no_pytest:
        rows, cases = [], []
    elif options.reuse_pytest:
        rows, cases = last_pytest()
        log(f"plain pytest: reused, {sum(row[2] for row in rows):.1f} s")
    else:
        rows, cases = plain_pytest(ran, declared, python)
        save_pytest(rows, cases)
    # A target whose cases Bazel ran but plain pytest did not would make both sides meaningless.
    silent = sorted({c.label for c in default_cases} - {c.label for c in cases})
    if rows and silent:
        print(f"plain pytest ran no case of {silent}, Bazel did: no comparison", file=sys.stderr)
        return 2
    runs = {"Bazel defaults": default_cases}
    if not options.no_pytest:
        runs = {"pytest": cases, **runs}
    alone = longest_alone(
        runs,
        options.alone,
        lambda case: case_alone(case, declared, python, warm=not options.no_warm),
    )
    alone_path = alone[0][-1].cold if alone else math.nan
    alone_warm = max((row[-1].warm for row in alone), default=math.nan)
    pytest_wall = sum(wall for _, _, wall, _ in rows) if rows else math.nan
    start = longest = gpu_work = spread = math.nan
    if not options.no_pytest:
        start = interpreter_start(python)
        longest = max((case.seconds for case in cases), default=0.0) + start
        gpu_work = gpu_bound(shares, cases, rows, start, gpus) if gpus else 0.0
        spread = (sum(case.seconds for case in cases) + start * len(rows)) / cores
    # Each term is a lower bound on its own; those not measured (nan) are left out.
    others = [term for term in (longest, gpu_work, spread) if not math.isnan(term)]
    # nan where no warm run was made: max() would pass over it and report the bound without it.
    warm_bound = math.nan if math.isnan(alone_warm) else max([*others, alone_warm])
    without_alone = max(others, default=math.nan)
    bound = max([*others, alone_path] if alone else others, default=math.nan)
    samples = [Sample(bazel_wall, bound)]
    for index in range(2, options.samples + 1):
        samples.append(
            next_sample(index, alone and alone[0][0], runs, others, selection, declared, python)
        )

    lines = [
        "# Suite on this host (host-interpreter mode): Bazel defaults vs plain pytest vs bound",
        "",
        f"host: {cores} cores, {gpus} GPUs; targets {' '.join(TARGETS)}"
        f"{f' (--test_tag_filters={options.tag_filters})' if options.tag_filters else ''}; "
        f"{recorded}; "
        f"vec-ISA memo filled once: {memo}",
        "",
        "| run | wall s | / bound | / pytest |",
        "| --- | ---: | ---: | ---: |",
        f"| plain pytest, serial | {pytest_wall:.1f} | {pytest_wall / bound:.2f} | 1 |",
        f"| `tools/bazel test` (defaults) | {bazel_wall:.1f} | {bazel_wall / bound:.2f} "
        f"| {bazel_wall / pytest_wall:.2f} |",
        *[
            f"| {lever.name}: `{lever.flags}` | {lever.wall:.1f} | {lever.wall / bound:.2f} "
            f"| {lever.wall / pytest_wall:.2f} |"
            for lever in levers
        ],
        f"| bound | {bound:.1f} | 1 | {bound / pytest_wall:.2f} |",
        "",
        f"- bound = max(longest case + start {longest:.1f}, longest case alone {alone_path:.1f}, "
        f"GPU occupancy / GPUs or per GPU set {gpu_work:.1f}, all work / cores {spread:.1f}); "
        f"interpreter start {start:.1f} s",
        f"- without the alone term (the path as longest case + start): {without_alone:.1f} s, "
        f"defaults {bazel_wall / without_alone:.2f}x it",
        f"- with the alone term warm instead (kernels the cold runs left, as before 2026-11-28; "
        f"no lower bound on a cold run): {warm_bound:.1f} s, defaults "
        f"{bazel_wall / warm_bound:.2f}x it"
        if not math.isnan(warm_bound)
        else "- with the alone term warm instead: not run (--no-warm)",
        "",
        f"| longest cases | {' | '.join(f's in {name}' for name in runs)} "
        "| s alone, cold | s alone, warm |",
        f"| --- | {' | '.join('---:' for _ in runs)} | ---: | ---: |",
        *[
            f"| `{row[0]}` | " + " | ".join(f"{s:.1f}" for s in [*row[1:-1], *row[-1]]) + " |"
            for row in alone
        ],
        "",
        *sample_rows(samples),
        f"- goals: bazel <= 1.15 x bound ({bazel_wall / bound:.2f}), "
        f"<= 0.35 x pytest ({bazel_wall / pytest_wall:.2f})",
        f"- bazel exit {defaults.code}; results: "
        + ", ".join(f"{k} {v}" for k, v in sorted(results.items())),
        *[
            f"- {lever.name}: exit {lever.code}, statuses "
            + ", ".join(sorted({t.status for t in lever.targets.values()}))
            for lever in levers
        ],
        "",
        *shard_rows(targets),
        *[
            line
            for lever in levers
            for line in ["", f"{lever.name} (`{lever.flags}`):", "", *shard_rows(lever.targets)]
        ],
        "",
        "| pytest of target | variant | wall s | result |",
        "| --- | --- | ---: | --- |",
        *[f"| {s} | {v} | {w:.1f} | {summary} |" for s, v, w, summary in rows],
        "",
        "Runner lines (thread budget, GPU lease):",
        "",
        *[f"    {line}" for line in runner],
    ]
    report = "\n".join(lines) + "\n"
    (RESULTS / "host_suite.md").write_text(report)
    print(report)
    return 0 if all(phase.code == 0 for phase in [defaults, *levers]) else 1


if __name__ == "__main__":
    sys.exit(main())
