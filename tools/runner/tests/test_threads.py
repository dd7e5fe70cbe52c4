"""Self-tests of the per-test thread budget (tools/runner/session/threads.py)."""

import os
import subprocess
import sys

from tools.runner.session import threads

HOLDER = """
import sys
from tools.runner.session import threads
threads.ThreadBudget.start({"TORCH_TEST_JOBS_DIR": sys.argv[1]})
print("registered", flush=True)
sys.stdin.read()
"""


def test_budget_shares_the_cores_between_running_tests():
    assert threads.budget(16, 1) == (16, None)  # alone: every core, inductor's own pool
    assert threads.budget(16, 7) == (3, 1)
    assert threads.budget(16, 16) == (threads.MIN_THREADS, 1)
    assert threads.budget(2, 2) == (2, 1)
    assert threads.budget(1, 3) == (1, 1)  # never more threads than cores


def _holder(directory):
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout.readline().strip() == "registered"
    return child


def test_running_tests_counts_live_holders_and_drops_dead_ones(tmp_path):
    env = {"TORCH_TEST_JOBS_DIR": str(tmp_path)}
    budget = threads.ThreadBudget.start(env)
    assert threads.running_tests(tmp_path) == 1
    child = _holder(tmp_path)
    try:
        assert threads.running_tests(tmp_path) == 2
        assert budget.apply()[0] == 2
    finally:
        child.kill()
        child.wait()
    assert threads.running_tests(tmp_path) == 1
    assert len(os.listdir(tmp_path)) == 1  # the dead one's file is gone


def test_a_value_the_user_set_is_left_alone(tmp_path):
    env = {"TORCH_TEST_JOBS_DIR": str(tmp_path), "OMP_NUM_THREADS": "5"}
    threads.ThreadBudget.start(env).apply()
    assert env["OMP_NUM_THREADS"] == "5"


def test_tests_with_the_same_pid_count_apart(tmp_path):
    # Bazel's sandboxes have PID namespaces: tests running at once may have the same PID.
    env = {"TORCH_TEST_JOBS_DIR": str(tmp_path)}
    threads.ThreadBudget.start(env)
    threads.ThreadBudget.start(env)  # a second registration from the same PID
    assert threads.running_tests(tmp_path) == 2
