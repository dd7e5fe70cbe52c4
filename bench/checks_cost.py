"""What the project's own checks cost, one commit's tree against another's, each as a fresh machine.

    python3 bench/checks_cost.py --base f0ced77 [--head HEAD] [--targets //...] [--out FILE]
    python3 bench/checks_cost.py --smoke     (both sides: this checkout on its own server, one
                                              probe target; what a tree change can break)

For each tree, both at once (so both meet the same load on a shared host): a fresh clone of
the commit, a new Bazel output user root (so Bazel's install base, @pypi and every runfiles tree
are made anew), a new pip cache (so @pypi downloads from the index, as on a new machine) and the
kernel caches moved away (the runner's, inductor's default and the vector-ISA memo:
tools/runner/process), then

    tools/bazel --output_user_root=NEW fetch //...       (Bazel and @pypi)
    tools/bazel --output_user_root=NEW test --config=ci --keep_going \
        --build_event_json_file=EVENTS -- //...

(--targets: other patterns or labels; a label one tree lacks is skipped there, --keep_going).

CPU seconds per target are the runner's `torch_test resources: ... CPU C s` line of each
test.log (its process tree's user+sys), summed over shards; a plain py_test has no runner, so
its action's wall stands in. "Own checks" are every target but the seed regression tests
(//dynamo_tests, //distributed_tests). Bazel itself is not reinstalled (tools/bazel installs it
where missing). Writes a markdown report to --out (default bench/results/checks_cost.md).
"""

import argparse
import concurrent.futures
import contextlib
import getpass
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu_suite import cpu_jiffies  # noqa: E402
from tools.results import bep  # noqa: E402

SEED = ("//dynamo_tests", "//distributed_tests")
CPU_LINE = re.compile(r"torch_test resources: wall [\d.]+ s, CPU ([\d.]+) s")
# Kernel caches a fresh machine lacks: the runner's shared folders and inductor's default.
KERNEL_CACHES = [
    f"/tmp/torch_tests_kernels_{os.getuid()}",
    f"/tmp/torch_tests_vec_isa_memo_{os.getuid()}",
    f"/tmp/torchinductor_{getpass.getuser()}",
]


def move_kernel_caches(aside: pathlib.Path) -> None:
    aside.mkdir(parents=True, exist_ok=True)
    for path in map(pathlib.Path, KERNEL_CACHES):
        with contextlib.suppress(FileNotFoundError):  # the other tree's thread moved it
            path.rename(aside / f"{path.name}.{time.time_ns()}")


def timed(cmd: list[str], cwd: pathlib.Path, env: dict, log: pathlib.Path) -> tuple[int, float]:
    start = time.monotonic()
    with log.open("a") as out:
        code = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return code.returncode, time.monotonic() - start


def target_cpu(target: bep.Target) -> tuple[float, bool, str]:
    """(CPU seconds, whether the runner measured them, Bazel's status) of one target's final
    shards; a shard stopped at its timeout has no runner line: its wall stands in."""
    cpu, measured = 0.0, True
    for attempt in target.final_attempts():
        found = attempt.log and CPU_LINE.findall(attempt.log.read_text(errors="replace"))
        if found:
            cpu += float(found[-1])
        else:
            cpu, measured = cpu + attempt.duration_s, False
    return cpu, measured, target.status


def measure(commit: str, scratch: pathlib.Path, targets: list[str], smoke=False) -> dict:
    tree, user_root = scratch / "tree", scratch / "bazel_root"
    env = {**os.environ, "PIP_CACHE_DIR": str(scratch / "pip_cache")}
    bazel = ["nice", "-n", "19", str(tree / "tools" / "bazel"), f"--output_user_root={user_root}"]
    if smoke:  # this checkout as it is, on its own server and caches
        tree, env, bazel = ROOT, dict(os.environ), [str(ROOT / "tools" / "bazel")]
    else:
        subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", commit], check=True)
        move_kernel_caches(scratch / "kernel_caches_aside")
    events, log = scratch / "events.json", scratch / "bazel.log"
    load0, (busy0, _) = os.getloadavg()[0], cpu_jiffies()
    _, fetch_s = timed([*bazel, "fetch", "//..."], tree, env, log)
    test_cmd = [*bazel, "test", "--config=ci", "--keep_going", f"--build_event_json_file={events}"]
    test_cmd += ["--", *targets]
    code, test_s = timed(test_cmd, tree, env, log)
    busy1, _ = cpu_jiffies()
    cpu = {label: target_cpu(t) for label, t in bep.read(events).items() if t.attempts}
    cases = subprocess.run(
        [sys.executable, str(ROOT / "tools/ci/summarize_testlogs.py"), str(events)],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not smoke:
        subprocess.run([*bazel, "shutdown"], cwd=tree, env=env, capture_output=True)
        shutil.rmtree(user_root, ignore_errors=True)  # chmod'ed read-only by Bazel: best effort
    return {
        "commit": subprocess.check_output(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"])
        .decode()
        .strip(),
        "code": code,
        "fetch_s": fetch_s,
        "test_s": test_s,
        "host_cpu_s": busy1 - busy0,
        "load": (load0, os.getloadavg()[0]),
        "cpu": cpu,
        "cases": cases.splitlines()[-1] if cases else "(no summary)",
    }


def own(label: str) -> bool:
    return not label.startswith(SEED)


def report(args, sides: dict[str, dict]) -> str:
    base, head = sides["base"], sides["head"]
    labels = sorted(set(base["cpu"]) | set(head["cpu"]), key=lambda lab: (not own(lab), lab))
    rows = []
    for label in labels:
        cells = []
        for side in (base, head):
            cpu, measured, status = side["cpu"].get(label, (None, True, ""))
            cell = "-" if cpu is None else f"{cpu:.1f}" + ("" if measured else " (wall)")
            cells.append(cell + ("" if status in bep.GREEN or cpu is None else f" {status}"))
        rows.append(f"| {label} | {cells[0]} | {cells[1]} |")

    def total(side, pick):
        return sum(cpu for label, (cpu, _, _) in side["cpu"].items() if pick(label))

    def row(what: str, cell) -> str:
        return f"| {what} | {cell(base)} | {cell(head)} |"

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"Host: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}; date {when}",
        f"Command: `python3 bench/checks_cost.py --base {args.base} --head {args.head}"
        + (f" --targets {' '.join(args.targets)}`" if args.targets != ["//..."] else "`"),
        "",
        "| | base | head |",
        "| --- | ---: | ---: |",
        row("commit", lambda s: s["commit"]),
        row("own checks, CPU-s", lambda s: f"{total(s, own):.0f}"),
        row("seed tests, CPU-s", lambda s: f"{total(s, lambda lab: not own(lab)):.0f}"),
        row("`fetch` (Bazel's install base, @pypi), s", lambda s: f"{s['fetch_s']:.0f}"),
        row("`test` wall, s", lambda s: f"{s['test_s']:.0f}"),
        row(
            "fresh machine's first `tools/bazel test`, s",
            lambda s: f"{s['fetch_s'] + s['test_s']:.0f}",
        ),
        row("the host's busy CPU-s meanwhile (all users)", lambda s: f"{s['host_cpu_s']:.0f}"),
        row("1-min load, start; end", lambda s: f"{s['load'][0]:.1f}; {s['load'][1]:.1f}"),
        row("exit status of `test`", lambda s: s["code"]),
        row("cases (summarize_testlogs)", lambda s: s["cases"]),
        "",
        "| target | base CPU-s | head CPU-s |",
        "| --- | ---: | ---: |",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--targets", nargs="+", default=["//..."])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench/results/checks_cost.md")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.base, args.targets = "HEAD", ["//tools/selftest:probe_plain"]
        args.out = pathlib.Path(os.environ.get("RESULTS_DIR", tempfile.gettempdir())) / "cc.md"
    elif not args.base:
        parser.error("--base is required (or --smoke)")

    def side(name: str) -> dict:
        scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"checks_cost_{name}_"))
        try:
            return measure(getattr(args, name), scratch, args.targets, args.smoke)
        finally:  # the clone, its pip cache and the kernel caches moved aside
            subprocess.run(["rm", "-rf", str(scratch)], check=False)

    with concurrent.futures.ThreadPoolExecutor(1 if args.smoke else 2) as pool:
        sides = dict(zip(("base", "head"), pool.map(side, ("base", "head")), strict=True))
    args.out.write_text(report(args, sides))
    print(args.out.read_text())
    return 0 if all(s["code"] == 0 for s in sides.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
