"""CPU suite benchmark: Bazel against plain pytest on the same sources and interpreter.

    python3 bench/cpu_suite.py            (from a clone; the first run fetches @pypi)
    python3 bench/cpu_suite.py --smoke    (every step on one small target, the shared kernel
                                          cache kept, nothing written: the self-test)

Measures, in one run, and writes bench/results/cpu_suite.md:
  cold         `tools/bazel test` of the dynamo and distributed tests, with
               --nocache_test_results and an empty kernel cache
  pytest       the same test sources, one pytest process per file, serially, in the same
               interpreter and packages as Bazel uses (@pypi), variant cpu
  warm no-op   the same Bazel command again: every test (cached)
  incremental  one test source edited: how many targets re-execute
  shards       max shard wall / mean shard wall per sharded target
  lower bound  sum of test-case times / cores + one interpreter start per shard
Wall and CPU seconds come from the machine's /proc/stat (the Bazel server is no child of
ours); peak RSS from the runner's record of each shard and /usr/bin/time for pytest.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import plain_env  # noqa: E402
from tools.results import bep, facts, junit  # noqa: E402
from tools.runner.process.kernel_cache import ROOT as SHARED_CACHE  # noqa: E402

RESULTS = ROOT / "bench" / "results"
BAZEL = str(ROOT / "tools" / "bazel")
KERNEL_CACHE = pathlib.Path(SHARED_CACHE)
CPU_SOURCES = [
    "dynamo_tests/test_aot_autograd.py",
    "dynamo_tests/test_recompile_ux.py",
    "dynamo_tests/test_torchrec.py",
    "distributed_tests/test_embedding_ops.py",
    "distributed_tests/test_dynamo_distributed.py",
]
# The same sources as CPU_SOURCES, so both sides run the same tests.
TARGETS = ["//dynamo_tests/...", "//distributed_tests/..."]
EDITED = ROOT / "dynamo_tests" / "test_recompile_ux.py"
SMOKE = sys.argv[1:] == ["--smoke"]
if SMOKE:  # a plain py_test (no torch) and a file of seven trivial tests
    TARGETS, EDITED = ["//tools/selftest:probe_plain"], ROOT / "tools" / "selftest" / "probe.py"
    CPU_SOURCES = ["tools/selftest/probe_shards.py"]


def cpu_jiffies() -> tuple[float, float]:
    """(busy seconds, wall seconds) of the whole machine so far."""
    fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, time.monotonic()


def measured(cmd, **kwargs):
    busy0, wall0 = cpu_jiffies()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kwargs)
    busy1, wall1 = cpu_jiffies()
    return proc, wall1 - wall0, busy1 - busy0


def bazel_test(*flags):
    """(process, wall, cpu, tests executed, targets from the build event file)."""
    events = RESULTS / "cpu_suite.bep.json"
    proc, wall, cpu = measured(
        [BAZEL, "test", *flags, f"--build_event_json_file={events}", *TARGETS]
    )
    executed = re.search(r"Executed (\d+) out of (\d+) test", proc.stdout + proc.stderr)
    return proc, wall, cpu, (int(executed.group(1)) if executed else -1), bep.read(events)


def peak_rss_from_records(targets: dict[str, bep.Target]) -> dict[str, int]:
    peaks = {}
    for label, target in targets.items():
        found = [facts.peak_rss_mib(facts.of(a)) for a in target.final_attempts()]
        if found := [peak for peak in found if peak is not None]:
            peaks[label] = max(found)
    return peaks


def shard_balance(targets: dict[str, bep.Target]) -> dict[str, float]:
    walls = {
        label: [a.duration_s for a in target.final_attempts()]
        for label, target in targets.items()
        if target.shard_count > 1
    }
    return {t: max(w) / (sum(w) / len(w)) for t, w in walls.items() if sum(w) > 0}


def case_seconds(targets: dict[str, bep.Target]) -> float:
    return sum(
        case.time_s
        for target in targets.values()
        for xml in target.xml_files()
        for case in junit.cases(xml)
    )


def pypi_env() -> dict:
    external = (
        pathlib.Path(
            subprocess.check_output([BAZEL, "info", "output_base"], cwd=ROOT, text=True).strip()
        )
        / "external"
        / "pypi"
    )
    python = str(external / "venv" / "bin" / "python3")
    env = plain_env.plain_pytest_env(
        "cpu", f"{ROOT}:{external / 'site'}", KERNEL_CACHE / "pytest", python
    )
    return env, python


def plain_pytest():
    env, python = pypi_env()
    shutil.rmtree(KERNEL_CACHE / "pytest", ignore_errors=True)
    rows, wall, cpu, peak = [], 0.0, 0.0, 0
    for source in CPU_SOURCES:
        cmd = [
            "/usr/bin/time",
            "-f",
            "maxrss_kib=%M",
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tools.runner.session.plugin",
            source,
        ]
        proc, w, c = measured(cmd, env=env)
        rss = int(re.search(r"maxrss_kib=(\d+)", proc.stderr).group(1)) // 1024
        summary = (proc.stdout.strip().splitlines() or ["?"])[-1]
        rows.append((source, w, rss, summary))
        wall, cpu, peak = wall + w, cpu + c, max(peak, rss)
    return rows, wall, cpu, peak


def interpreter_start_seconds() -> float:
    env, python = pypi_env()
    start = time.monotonic()
    subprocess.run([python, "-c", "import torch, pytest"], env=env, check=True)
    return time.monotonic() - start


def main() -> int:
    RESULTS.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    subprocess.run([BAZEL, "build", *TARGETS], cwd=ROOT, check=True, capture_output=True)

    if not SMOKE:  # the smoke leaves other targets' kernels alone
        shutil.rmtree(KERNEL_CACHE, ignore_errors=True)
    cold, cold_wall, cold_cpu, cold_n, targets = bazel_test("--nocache_test_results")
    if cold.returncode != 0:
        print(cold.stdout[-3000:], cold.stderr[-3000:], file=sys.stderr)
        return 1
    peaks = peak_rss_from_records(targets)
    balance = shard_balance(targets)
    shards = sum(len(t.final_attempts()) for t in targets.values())
    bound = case_seconds(targets) / cores + shards * interpreter_start_seconds() / cores

    bazel_test()  # the first run without --nocache_test_results re-analyses: options changed
    _, warm_wall, _, warm_n, _ = bazel_test()
    original = EDITED.read_text()
    try:
        EDITED.write_text(original + "\n# edited by bench/cpu_suite.py\n")
        _, incr_wall, _, incr_n, _ = bazel_test()
    finally:
        EDITED.write_text(original)

    rows, py_wall, py_cpu, py_peak = plain_pytest()

    lines = [
        "# CPU suite: Bazel vs plain pytest",
        "",
        f"host: {cores} cores; Bazel runs the cpu targets of {' '.join(TARGETS)}",
        "",
        "| run | wall s | cpu s | tests executed | note |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| bazel cold | {cold_wall:.1f} | {cold_cpu:.1f} | {cold_n} | --nocache_test_results |",
        f"| plain pytest, serial | {py_wall:.1f} | {py_cpu:.1f} | {len(rows)} files | |",
        f"| bazel warm no-op | {warm_wall:.2f} | | {warm_n} | all (cached) |",
        f"| bazel after one edit | {incr_wall:.1f} | | {incr_n} | {EDITED.name} edited |",
        "",
        f"- cold / plain pytest: {cold_wall / py_wall:.2f}",
        f"- lower bound (case seconds / cores + interpreter starts): {bound:.1f} s;"
        f" cold / lower bound: {cold_wall / bound:.2f}",
        f"- peak RSS: pytest {py_peak} MiB (largest file); Bazel per test process: "
        + ", ".join(f"{k} {v} MiB" for k, v in sorted(peaks.items())),
        "- shard balance (max/mean): "
        + (", ".join(f"{k} {v:.2f}" for k, v in sorted(balance.items())) or "no sharded target"),
        "",
        "| pytest file | wall s | peak RSS MiB | result |",
        "| --- | ---: | ---: | --- |",
        *[f"| {s} | {w:.1f} | {r} | {summary} |" for s, w, r, summary in rows],
    ]
    report = "\n".join(lines) + "\n"
    if not SMOKE:
        (RESULTS / "cpu_suite.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
