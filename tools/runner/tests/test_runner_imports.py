"""The runner's own process stays light: it imports neither pytest nor torch.

Every shard pays the runner's imports once more beside its test process, and the runner reads
a test's outcome from what its witness saw, not through pytest's code (tools/runner/verdict.py
keeps the not-applicable prefix in tools/results/record.py for this reason)."""

import subprocess
import sys

HEAVY = ("pytest", "_pytest", "torch")


def test_the_runner_imports_no_pytest_and_no_torch():
    code = (
        "import sys, tools.runner.pytest_runner\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
