"""Bench of the upgrade gate (tools/gate/gate.py): its cost over running the two sides by hand.

    python3 bench/gate.py --candidate python:/opt/torch214/bin/python [TARGET...]

1. cold baseline run, then cold candidate run, one after the other (`tools/bazel test` in the
   output bases the gate uses), then a cold gate over the same targets:
   goal  gate <= 1.1 x (baseline + candidate).
2. the gate again with nothing changed (every test cached on both sides): goal <= 5 s.

"Cold" = no cached test result and an empty kernel cache: every run gets its own
--test_env=TORCH_TEST_BENCH_NONCE (part of every test's cache key) and its own inductor/triton
cache directory. Repositories (@pypi) and Bazel servers stay warm: the gate adds nothing there.
Targets default to //dynamo_tests/... and the embedding test (BERT left out: 7 GB per side).
Writes bench/results/gate.tsv. On a loaded host the two cold runs vary by tens of percent
between repetitions; the row "outside its two bazel test runs" is the gate's own cost.
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.gate import gate, sides  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def cold_flags() -> list[str]:
    nonce = uuid.uuid4().hex[:12]
    cache = f"/tmp/torch_tests_bench_gate/{nonce}"
    return [
        f"--test_env=TORCH_TEST_BENCH_NONCE={nonce}",
        f"--test_env=TORCHINDUCTOR_CACHE_DIR={cache}/inductor",
        f"--test_env=TRITON_CACHE_DIR={cache}/triton",
    ]


def timed(argv: list, env: dict, log: pathlib.Path, cwd: pathlib.Path = ROOT) -> float:
    start = time.monotonic()
    with log.open("w") as f:
        code = subprocess.run(argv, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - start
    print(f"  {wall:7.1f} s  exit {code}  {' '.join(argv[:4])} ...  (log {log})", flush=True)
    return wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "targets",
        nargs="*",
        default=["//dynamo_tests/...", "//distributed_tests:test_embedding_ops"],
    )
    parser.add_argument("--baseline", default="pinned")
    parser.add_argument("--candidate", required=True)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "gate"
    out.mkdir(exist_ok=True)

    gate_args = argparse.Namespace(out=str(out / "report"), output_root=None, bazel_arg=[])
    g = gate.Gate(gate_args)
    g.out.mkdir(parents=True, exist_ok=True)
    bench_sides = [sides.parse("baseline", args.baseline), sides.parse("candidate", args.candidate)]
    # Warm the servers and repositories first: the comparison is about running tests.
    for side in bench_sides:
        g.prepare(side)

    # Each side alone, cold, through the gate's own Bazel invocation (same output base,
    # workspace, startup options and environment as the gate's run).
    solo = 0.0
    for side in bench_sides:
        start = time.monotonic()
        g.bazel(
            side,
            "test",
            ["--keep_going", *cold_flags(), "--", *args.targets],
            f"solo_{side.role}.log",
        )
        wall = time.monotonic() - start
        print(
            f"  {wall:7.1f} s  {side.role} alone  (log {g.out / f'solo_{side.role}.log'})",
            flush=True,
        )
        solo += wall

    gate_cmd = [sys.executable, str(ROOT / "tools/gate/gate.py"), "--baseline", args.baseline]
    gate_cmd += ["--candidate", args.candidate, "--out", str(out / "report")]
    flags = [f"--bazel-arg={f}" for f in cold_flags()]
    cold_gate = timed([*gate_cmd, *flags, *args.targets], dict(os.environ), out / "gate_cold.log")
    regate = timed([*gate_cmd, *flags, *args.targets], dict(os.environ), out / "gate_regate.log")

    # The gate's own cost, whatever the load: its wall minus its two `bazel test` runs.
    runs = re.findall(r"targets in ([0-9.]+) s", (out / "gate_cold.log").read_text())
    overhead = cold_gate - sum(map(float, runs))
    rows = [
        ("cold baseline + cold candidate, one after the other (s)", f"{solo:.1f}"),
        ("cold gate (s)", f"{cold_gate:.1f}"),
        ("cold gate / (baseline + candidate)  [goal <= 1.1]", f"{cold_gate / solo:.2f}"),
        ("cold gate outside its two bazel test runs (s)", f"{overhead:.1f}"),
        ("re-gate, nothing changed (s)  [goal <= 5]", f"{regate:.1f}"),
        ("load average (1, 5, 15 min) at the end", " ".join(f"{x:.1f}" for x in os.getloadavg())),
    ]
    text = "".join(f"{name}\t{value}\n" for name, value in rows)
    (RESULTS / "gate.tsv").write_text(f"targets\t{' '.join(args.targets)}\n" + text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
