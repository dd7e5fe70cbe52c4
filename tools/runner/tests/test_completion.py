"""The runner passes a target only if every selected test reported a result.

Each test runs the real runner (tools/runner/pytest_runner.py) in a subprocess on a generated
test file that ends its process early with status 0, the way a library's cleanup path can;
before tools/runner/completion.py each of these was PASSED (and cached) by Bazel.
"""

import os
import pathlib
import signal
import textwrap
import time

import pytest

from tools.runner import private_tmp
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, start_runner, write_tests

THREE_TESTS = """
    import os
    import pytest

    def test_a():
        pass

    def test_exit():
        {exit}

    def test_c():
        assert False
"""


@pytest.mark.parametrize(
    "exit_call",
    ["os._exit(0)", "pytest.exit('leaving early', returncode=0)"],
    ids=["os_exit", "pytest_exit"],
)
def test_early_exit_with_status_zero_fails(tmp_path, exit_call):
    test_file = write_tests(tmp_path, THREE_TESTS.format(exit=exit_call))
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the last test that started: test_fixture.py::test_exit" in result.stderr


def test_exit_at_import_fails(tmp_path):
    test_file = write_tests(tmp_path, "import os\nos._exit(0)\n\ndef test_a():\n    pass\n")
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 1
    assert "exited with status 0 before pytest finished; no test had started" in result.stderr


def test_complete_run_passes_and_empty_shard_passes(tmp_path):
    test_file = write_tests(tmp_path, "def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    assert run_runner(test_file, bazel_env(tmp_path)).returncode == 0
    env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=3, TEST_SHARD_INDEX=2)
    assert run_runner(test_file, env).returncode == 0  # two tests, three shards: one is empty


def test_killed_test_process_is_named(tmp_path):
    body = "import os, signal\n\ndef test_killed():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 128 + signal.SIGKILL
    assert "killed by SIGKILL; the last test that started: test_fixture.py::test_killed" in (
        result.stderr
    )


RECORDS_TMPDIR = """
    import os, pathlib, time

    def test_waits():
        pathlib.Path({record!r}).write_text(os.environ["TMPDIR"])
        time.sleep(600)
"""


def _start_and_wait_for_tmpdir(tmp_path):
    record = tmp_path / "tmpdir"
    test_file = write_tests(tmp_path, RECORDS_TMPDIR.format(record=str(record)))
    proc = start_runner(test_file, bazel_env(tmp_path))
    deadline = time.monotonic() + 60
    while not record.exists() or not record.read_text():
        assert time.monotonic() < deadline, "fixture test never started"
        time.sleep(0.1)
    short = pathlib.Path(record.read_text())
    assert short.name.startswith(private_tmp.PREFIX) and short.is_dir()
    return proc, short


def test_sigterm_leaves_no_private_tmp(tmp_path):
    proc, short = _start_and_wait_for_tmpdir(tmp_path)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert not short.exists()


def test_private_tmp_of_a_killed_runner_is_removed_by_the_next(tmp_path):
    proc, short = _start_and_wait_for_tmpdir(tmp_path)
    proc.kill()  # SIGKILL: the runner cannot clean up; its pytest child gets SIGTERM
    proc.communicate(timeout=30)
    # Any runner starting on this host now removes it (under Bazel, a concurrent test's may
    # come first); before the sweep nothing ever did.
    test_file = write_tests(tmp_path, "def test_a():\n    pass\n", name="test_next.py")
    assert run_runner(test_file, bazel_env(tmp_path)).returncode == 0
    assert not short.exists()


def test_live_runners_private_tmp_is_kept(tmp_path):
    with private_tmp.private_tmp(str(tmp_path)) as live:
        stale = tmp_path / (private_tmp.PREFIX + "dead")
        stale.mkdir()
        (stale / private_tmp.LOCK).touch()  # nobody holds it
        assert private_tmp.remove_stale(str(tmp_path)) == [str(stale)]
        assert os.path.isdir(live)
    assert not os.path.exists(live)


LEAVES_WORK_FOR_THE_EXIT = """
    import atexit, pathlib, threading, time

    OUT = pathlib.Path({out!r})


    class FreedAtTeardown:
        def __del__(self):
            (OUT / "teardown").write_text("ran")


    KEPT = FreedAtTeardown()  # a module's global: only the interpreter's teardown frees it
    atexit.register(lambda: (OUT / "atexit").write_text("ran"))


    def _late():
        time.sleep(0.5)
        (OUT / "thread").write_text("ran")


    def test_starts_a_thread_it_does_not_join():
        threading.Thread(target=_late).start()  # not a daemon: Python's exit waits for it
"""


def test_the_test_process_exits_as_python_does_less_the_teardown(tmp_path):
    """The session's process waits for the threads a test left and runs its atexit handlers,
    as Python's exit does, then skips the interpreter's teardown (child.exit_without_teardown):
    seconds of CPU per target with torch loaded that no test can observe."""
    out = tmp_path / "out"
    out.mkdir()
    test_file = write_tests(tmp_path, LEAVES_WORK_FOR_THE_EXIT.format(out=str(out)))
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["atexit", "thread"]


# The evidence a test process leaves is the runner's as it is written: a test that looks for
# its ledger or its inventory's record in its TMPDIR, to rewrite them once written, finds none.
# (The conftest drops test_dropped: red, unless the inventory forgets it.)
REWRITES_THE_EVIDENCE = """
    import json
    import os
    import time

    def _rewrite(path, edit):
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(edit(text))

    def _forget_dropped(text):
        record = json.loads(text)
        record["items"] = {k: v for k, v in record["items"].items() if "dropped" not in k}
        return json.dumps(record)

    def test_rewrites():
        tmp = os.environ["TMPDIR"]
        ledger, inventory = os.path.join(tmp, "ledger"), os.path.join(tmp, "inventory.json")
        if not os.path.exists(ledger):
            return
        for _ in range(200):  # the forked inventory writes its record beside the tests
            if os.path.exists(inventory):
                break
            time.sleep(0.05)
        _rewrite(inventory, _forget_dropped)
        _rewrite(ledger, lambda text: text.replace("selected", "started"))

    def test_dropped():
        pass
    """

DROPS = """
    def pytest_collection_modifyitems(items):
        items[:] = [item for item in items if "dropped" not in item.name]
    """


def test_the_evidence_cannot_be_rewritten_after_the_fact(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(DROPS))
    result = run_runner(write_tests(tmp_path, REWRITES_THE_EVIDENCE), bazel_env(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "defined but never ran: test_fixture.py::test_dropped" in result.stderr
