"""One test case alone, in fresh plain pytest processes, under named conditions, side by side.

    tools/bazel setup --host-python=$(command -v python3)     # once per checkout (host mode)
    python3 bench/case_alone.py LABEL NODE_ID [--runs N] [--condition NAME:STATE[:K=V,...]]...

What sets bench/host_suite.py's bound on a GPU host is its longest case alone (cold since
2026-11-28, as the Bazel run it is set against; warm before, with the kernels an earlier run
left). This bench separates what the case costs cold, warm and under the thread budget a
loaded host gives it, on one host in one call, each condition's runs interleaved with the
others' (round after round) so the host's drift is shared:

  STATE  cold: the kernel caches emptied before the run; warm: as the run before it left them
         (list a warm condition after the cold one whose kernels it should find)
  K=V    environment of the test process on top of plain pytest's (bench/plain_env.py), e.g.
         OMP_NUM_THREADS=3,TORCHINDUCTOR_COMPILE_THREADS=1: the runner's budget for a test
         beside eleven others on 16 cores (its log's "torch_test threads" line)

Default conditions: defaults cold, defaults warm, the budget of 3 intra-op threads and one
compile worker cold, then warm. The vector-ISA memo is filled once first (host_suite's memo
phase). Writes RESULTS_DIR/case_alone.md (default bench/results): per condition, each run's wall
and the median.
"""

import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import host_suite  # noqa: E402
from tools.python import host_mode  # noqa: E402

SUITE_BUDGET = "OMP_NUM_THREADS=3,TORCHINDUCTOR_COMPILE_THREADS=1"
DEFAULT_CONDITIONS = [
    "defaults cold:cold",
    "defaults warm:warm",
    f"budget cold:cold:{SUITE_BUDGET}",
    f"budget warm:warm:{SUITE_BUDGET}",
]


def parse_condition(text: str) -> tuple[str, str, dict[str, str]]:
    """NAME:STATE[:K=V,...] -> (name, state, env)."""
    name, state, *rest = text.split(":", 2)
    if state not in ("cold", "warm"):
        raise SystemExit(f"{text}: the state is cold or warm, not {state!r}")
    env = dict(pair.split("=", 1) for pair in rest[0].split(",")) if rest and rest[0] else {}
    return name, state, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("label", help="the case's target, e.g. //pkg:test_x_gpu (its variant)")
    parser.add_argument("node_id", help="the case, as pytest names it from the repository root")
    parser.add_argument("--runs", type=int, default=2, help="rounds (each runs every condition)")
    parser.add_argument("--condition", action="append", help="NAME:STATE[:K=V,...]")
    options = parser.parse_args(argv)
    python = host_mode.host_python()
    if not python:
        raise SystemExit("host mode only: `tools/bazel setup --host-python=PATH`")
    conditions = [parse_condition(c) for c in options.condition or DEFAULT_CONDITIONS]
    package = options.label.removeprefix("//").split(":")[0]
    declared = host_suite.declared_variants(host_suite.query_tests(f"tests(//{package}:all)"))
    kernels = host_suite.KERNEL_CACHE / "case_alone"
    host_suite.log(f"vec-ISA memo: {host_suite.fill_vec_isa_memo(python)}")
    walls: dict[str, list[float]] = {name: [] for name, _, _ in conditions}
    for _ in range(options.runs):
        for name, state, env in conditions:
            walls[name].append(
                host_suite.run_alone(
                    options.label, options.node_id, declared, python, state, kernels, env
                )
            )
    lines = [
        f"`{options.node_id}` ({options.label}) alone, {options.runs} round(s)",
        "",
        "| condition | kernel caches | environment | walls s | median s |",
        "| --- | --- | --- | --- | ---: |",
    ]
    for name, state, env in conditions:
        shown = ", ".join(f"{k}={v}" for k, v in env.items()) or "plain pytest's"
        runs = ", ".join(f"{w:.1f}" for w in walls[name])
        lines.append(
            f"| {name} | {state} | {shown} | {runs} | {statistics.median(walls[name]):.1f} |"
        )
    report = "\n".join(lines)
    print(report)
    host_suite.RESULTS.mkdir(parents=True, exist_ok=True)
    (host_suite.RESULTS / "case_alone.md").write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
