"""Self-tests of the per-test thread budget (tools/runner/session/threads.py)."""

import json
import os
import subprocess
import sys

from tools.runner.session import sharding, threads

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


def test_a_long_case_counts_only_the_tests_expected_midway():
    # A 40 s case beside a 10 s test, a 30 s one and one with no record: the 10 s one will be
    # gone at its midpoint (20 s), the others still there.
    assert threads.sharing_midway(40.0, [10.0, 30.0, None]) == 3
    assert threads.sharing_midway(None, [10.0, 30.0, None]) == 4  # no record: all running now
    assert threads.sharing_midway(1.0, [10.0, 30.0]) == 3  # a short case shares with all
    # Fewer sharing tests than running ones: more intra-op threads, compile workers unchanged.
    assert threads.budget(16, 12, 4) == (4, 1)
    assert threads.budget(16, 12, 20) == (2, 1)  # never more sharing than running


def test_remaining_seconds_counts_an_unrecorded_case_as_sharding_does():
    durations = {"a": 1.0, "c": 3.0}
    unknown = sharding.UNKNOWN_DURATION
    assert threads.remaining_seconds(["a", "b", "c"], durations) == [
        1 + unknown + 3,
        unknown + 3,
        3.0,
    ]
    assert threads.remaining_seconds(["a", "c"], {}) == [None, None]  # no record at all


def test_a_case_reads_what_the_others_published(tmp_path):
    env = {"TORCH_TEST_JOBS_DIR": str(tmp_path)}
    short = threads.ThreadBudget.start(dict(env))
    unknown = threads.ThreadBudget.start(dict(env))
    long = threads.ThreadBudget.start(dict(env))
    short.publish(5.0)
    unknown.publish(None)
    assert sorted(threads.running_remaining(tmp_path, long.own), key=str) == [5.0, None]
    long.cores = 12  # as on a 12-core host, whatever this one has
    assert long.apply(40.0) == (3, 6, 1)  # the short one is gone by then: 12 cores / 2
    assert long.apply(None) == (3, 4, 1)  # no record for the case: 12 / 3
    off = threads.ThreadBudget.start({**env, "TORCH_TEST_THREAD_FORECAST": "off"})
    off.cores = 12
    assert off.apply(40.0) == (4, 3, 1)  # every running test, the record notwithstanding


RUN_WITH_BUDGET = """
import json, sys
import pytest
from tools.runner.session import threads
env = {"TORCH_TEST_JOBS_DIR": sys.argv[1]}
budget = threads.ThreadBudget.start(env, durations=json.loads(sys.argv[3]))
budget.cores = 12
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[2]], plugins=[budget]))
"""


def test_each_case_publishes_what_is_left_and_budgets_for_its_own_length(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    tests = tmp_path / "test_two.py"
    tests.write_text("def test_long():\n    pass\n\n\ndef test_short():\n    pass\n")
    neighbour = threads.ThreadBudget.start({"TORCH_TEST_JOBS_DIR": str(jobs)})
    neighbour.publish(5.0)  # a test the record says ends within 5 s
    assert threads.running_remaining(jobs) == [5.0]
    durations = {"test_two.py::test_long": 40.0, "test_two.py::test_short": 1.0}
    run = subprocess.run(
        [sys.executable, "-c", RUN_WITH_BUDGET, str(jobs), str(tests), json.dumps(durations)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("torch_test threads:")]
    assert lines[1:] == [  # the first, at registration, counted this host's own cores
        "torch_test threads: 2 test(s) running (1 through this case) on 12 cores: "
        "intra-op 12, compile workers 1",  # test_long: 41 s left, the neighbour gone midway
        "torch_test threads: 2 test(s) running on 12 cores: intra-op 6, compile workers 1",
    ]


def test_a_test_publishes_its_shards_record_from_registration_on(tmp_path):
    # Tests of a suite register at once and collect for seconds: what their shards hold
    # must be readable before their first case, or a long case counts them all as unknown.
    durations = {"t::a": 30.0, "t::b": 10.0, "t::c": 5.0}
    first, second = sharding.ShardSelector(0, 2, durations), sharding.ShardSelector(1, 2, durations)
    assert (first.recorded_seconds(), second.recorded_seconds()) == (30.0, 15.0)
    assert sharding.ShardSelector(0, 1, {}).recorded_seconds() is None
    env = {"TORCH_TEST_JOBS_DIR": str(tmp_path)}
    threads.ThreadBudget.start(dict(env), durations=durations, expected=15.0)
    threads.ThreadBudget.start(dict(env))  # no record: blank
    assert sorted(threads.running_remaining(tmp_path), key=str) == [15.0, None]
