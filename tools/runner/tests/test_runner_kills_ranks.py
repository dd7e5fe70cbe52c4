"""Bazel's timeout kill (SIGTERM to the runner) while multi-process ranks are alive.

Runs the real runner (tools/runner/pytest_runner.py) in a subprocess, with the environment Bazel
would give it, on a generated test whose ranks (test_utils.distributed.run_ranks) each start a
grandchild, write their pids and hang. Once every rank is up the runner gets SIGTERM, as Bazel
sends at TEST_TIMEOUT; it must dump every thread's stack, exit non-zero within seconds, and leave
no process behind: neither a recorded pid nor any process whose command line or environment
names this test's private directory (forkserver, resource tracker, ranks, grandchildren).
"""

import os
import pathlib
import signal
import time

from tools.runner.tests.runner_subprocess import bazel_env, start_runner, write_tests

WORLD_SIZE = 2
STARTUP_TIMEOUT_S = 40.0  # runner + forkserver import torch; below a small test's 60 s
EXIT_WITHIN_S = 10.0  # SIGTERM -> KeyboardInterrupt -> killpg of every rank -> exit
GONE_WITHIN_S = 5.0  # after the runner exited: the kernel's part (PDEATHSIG, reaping)

FIXTURE = """
    import os
    import subprocess
    import time

    from test_utils.distributed import run_ranks

    PID_DIR = {pid_dir!r}


    def _write(name, pid):
        path = os.path.join(PID_DIR, name)
        with open(path + ".tmp", "w") as f:
            f.write(str(pid))
        os.rename(path + ".tmp", path)


    def _start_grandchild_and_hang():
        rank = os.environ["RANK"]
        child = subprocess.Popen(["sleep", "600"])
        _write(f"grandchild{{rank}}", child.pid)
        _write(f"rank{{rank}}", os.getpid())
        while True:
            time.sleep(0.5)


    def test_ranks_hang_until_bazel_kills_the_runner():
        run_ranks(_start_grandchild_and_hang, {world_size}, backend="gloo", timeout=300)
"""


def recorded_pids(pid_dir: pathlib.Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in pid_dir.iterdir() if not p.name.endswith(".tmp")}


def processes_naming(marker: str) -> set[int]:
    """Live (non-zombie) processes, other than this one, whose cmdline or environ has `marker`."""
    found = set()
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue  # exited while we looked, or not ours to read
        if needle in cmdline or needle in environ:
            found.add(int(entry))
    return found


def host_pids(inner: set[int], candidates: set[int]) -> set[int]:
    """This host's pids of the `candidates` whose pid in their own (innermost) namespace is in
    `inner` (the last field of their status's NSpid line)."""
    found = set()
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(nspid.split()[-1]) in inner:
            found.add(pid)
    return found


def alive(pids) -> set[int]:
    left = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    left.add(pid)
        except OSError:
            pass
    return left


def wait_for(predicate, timeout: float) -> bool:
    until = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > until:
            return False
        time.sleep(0.05)
    return True


def kill_leftovers(pids) -> None:
    """A failing run must not leave its orphans to the next test on this host."""
    for pid in alive(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigterm_to_runner_kills_every_rank(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    fixture = FIXTURE.format(pid_dir=str(pid_dir), world_size=WORLD_SIZE)
    test_file = write_tests(tmp_path, fixture, name="test_ranks_hang_fixture.py")
    marker = str(tmp_path)  # unique to this test: in every descendant's environment
    env = bazel_env(
        tmp_path,
        dict(variant="cpu", declared_variants=["cpu"]),
        TEST_TARGET="//fake:ranks_hang",
    )
    runner = start_runner(test_file, env)
    pids: set[int] = set()
    try:
        up = wait_for(lambda: len(recorded_pids(pid_dir)) == 2 * WORLD_SIZE, STARTUP_TIMEOUT_S)
        assert up, f"ranks did not start; recorded: {sorted(recorded_pids(pid_dir))}"
        tree = processes_naming(marker) - {runner.pid}  # forkserver, tracker, ranks, children
        # The ranks wrote their pids in the test process's pid namespace (private_pids.py).
        pids = host_pids(set(recorded_pids(pid_dir).values()), tree)
        assert len(pids) == 2 * WORLD_SIZE, f"recorded pids not found by environment scan {tree}"

        sent = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        stdout, stderr = runner.communicate(timeout=EXIT_WITHIN_S + 20)
        exit_s = time.monotonic() - sent

        assert runner.returncode != 0, stdout + stderr
        assert exit_s < EXIT_WITHIN_S, f"runner took {exit_s:.1f} s to exit after SIGTERM"
        hung = "test_ranks_hang_fixture.py::test_ranks_hang_until_bazel_kills_the_runner (call)"
        assert f"*** SIGTERM (Bazel timeout?) while running {hung}: stacks of all threads ***" in (
            stderr
        ), stderr
        assert "test_ranks_hang_until_bazel_kills_the_runner" in stderr  # where the test hung
        gone = wait_for(lambda: not alive(pids), GONE_WITHIN_S)
        assert gone, f"ranks or their children outlived the runner: {sorted(alive(pids))}"
        gone = wait_for(lambda: not processes_naming(marker), GONE_WITHIN_S)
        assert gone, f"processes outlived the runner: {sorted(processes_naming(marker))}"
        print(f"runner exited {exit_s:.2f} s after SIGTERM; {len(tree)} descendants, 0 left")
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
        kill_leftovers(pids | processes_naming(marker))
