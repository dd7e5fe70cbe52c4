"""What a runner costs a target, one checkout's against another's, side by side, alternating.

    python3 bench/runner_cost.py --before /path/to/old/checkout [--tests 300] [--runs 3]
        [--shape cases|tiny|inductor] [--plain]

Runs tools/runner/pytest_runner.py of this checkout ("this") and of the `--before` checkout
(e.g. a `git worktree add` of an earlier commit) on one generated source, alternating the two
`--runs` times, and prints a markdown table of each runner's wall and CPU seconds (its process
tree's, from wait4) and their medians. The source: `--tests` trivial cases (functions,
parametrized cases and unittest methods) that import torch, as a target does (`--shape cases`),
or one file of a bench/scale.py shape: `tiny` (three dynamo compiles) or `inductor` (the same,
inductor as the third backend; kernel caches cold in every run, the vector-ISA memo as the
host keeps it). `--plain` adds a third row: one plain `pytest` process on the same file, no
runner (the floor of a process per file).
Run it with the interpreter of the tests (e.g. the pinned @pypi's, or a venv with the pinned
lock).
"""

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parents[1]

SOURCE = """
import unittest

import pytest
import torch


@pytest.mark.parametrize("n", range({third}))
def test_param(n):
    assert torch.tensor(n).item() == n


{functions}


class TestMethods(unittest.TestCase):
{methods}
"""


def source(tests: int) -> str:
    third = tests // 3
    functions = "\n".join(f"def test_f{i}():\n    assert {i} + 1 > {i}\n" for i in range(third))
    methods = "\n".join(
        f"    def test_m{i}(self):\n        self.assertEqual({i}, {i})\n" for i in range(third)
    )
    return SOURCE.format(third=third, functions=functions, methods=methods)


def scale_shape(shape: str) -> str:
    sys.path.insert(0, str(HERE))
    from bench import scale

    return scale.SHAPES[shape][0].format(k=3)


def runner(tree: pathlib.Path) -> tuple[list[str], pathlib.Path]:
    """A row's (command less the test file, PYTHONPATH): `tree`'s runner."""
    return [sys.executable, str(tree / "tools/runner/pytest_runner.py")], tree


# The floor of a process per file: pytest alone, no runner.
PLAIN = ([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], HERE)


def run_once(row: tuple, test_file: pathlib.Path, workdir: pathlib.Path) -> tuple:
    command, pythonpath = row
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TEST_", "TESTBRIDGE_", "XML_", "TORCH_TEST_"))
    }
    (workdir / "tmp").mkdir(exist_ok=True)
    env.update(
        TEST_TMPDIR=str(workdir / "tmp"),
        XML_OUTPUT_FILE=str(workdir / "test.xml"),
        TEST_TARGET="//bench:runner_cost",
        PYTHONPATH=str(pythonpath),
        PYTHONDONTWRITEBYTECODE="1",
        TORCHINDUCTOR_CACHE_DIR=str(workdir / "inductor"),  # cold, as a fresh target's
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(
        [*command, str(test_file)],
        env=env,
        cwd=test_file.parent,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{command}: the run failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=pathlib.Path, required=True)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shape", choices=("cases", "tiny", "inductor"), default="cases")
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    rows = {"before": runner(args.before.resolve()), "this": runner(HERE)}
    if args.plain:
        rows["plain pytest"] = PLAIN
    samples = {name: [] for name in rows}
    with tempfile.TemporaryDirectory() as scratch:
        test_file = pathlib.Path(scratch) / "test_many.py"
        test_file.write_text(
            source(args.tests) if args.shape == "cases" else scale_shape(args.shape)
        )
        for _ in range(args.runs):
            for name, row in rows.items():
                work = pathlib.Path(tempfile.mkdtemp(dir=scratch))
                samples[name].append(run_once(row, test_file, work))
    what = f"{args.tests} cases" if args.shape == "cases" else f"scale.py's {args.shape} shape"
    print(f"{what}, {args.runs} runs each, alternating; {sys.executable}\n")
    print("| runner | wall s (runs) | median wall s | CPU s (runs) | median CPU s |")
    print("| --- | --- | ---: | --- | ---: |")
    for name, runs in samples.items():
        walls = ", ".join(f"{w:.2f}" for w, _ in runs)
        cpus = ", ".join(f"{c:.2f}" for _, c in runs)
        print(
            f"| {name} | {walls} | {statistics.median(w for w, _ in runs):.2f} | {cpus} | "
            f"{statistics.median(c for _, c in runs):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
