"""The test process's pid namespace and /proc of its own (tools/runner/private_pids.py).

What a test must not reach through /proc: a process outside the runner's mount namespace (its
`/proc/<pid>/root` is the real workspace, past the source view), nor the runner (its memory,
its descriptors). And what must not change for the runner: how the test process ends (status,
signal), SIGTERM reaching it, the descriptors it was given. Each case runs a child command
under the module's PREFIX, as the runner starts the test process and the inventory.
"""

import json
import os
import signal
import subprocess
import sys
import time

from tools.runner import private_pids

LOOK = """
import json, os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "pids": pids,
                  "namespace": os.readlink("/proc/self/ns/pid")}))
"""


def _run(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*private_pids.PREFIX, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **kwargs.pop("env", {})},
        timeout=60,
        **kwargs,
    )


def test_the_test_process_sees_only_its_own_namespace():
    done = _run(LOOK)
    assert done.returncode == 0, done.stderr
    assert "host's /proc" not in done.stderr  # this host can make the namespace
    seen = json.loads(done.stdout)
    # pid 2 under the namespace's init, in a namespace that is not this pytest's: its /proc
    # lists those two alone, none of their ancestors.
    assert (seen["pid"], seen["ppid"]) == (2, 1), seen
    assert seen["pids"] == [1, 2], seen
    assert seen["namespace"] != os.readlink("/proc/self/ns/pid"), seen


def test_no_process_outside_is_reachable_through_proc():
    # The forger's way past the source view: the root of a process outside its mount namespace.
    code = (
        "import os, sys\n"
        "mine = os.readlink('/proc/self/ns/mnt')\n"
        "others = [p for p in os.listdir('/proc') if p.isdigit() and\n"
        "          os.readlink(f'/proc/{p}/ns/mnt') != mine and p != '1']\n"
        "print(others)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_exit_status_and_signals_end_the_outer_process_as_the_command():
    assert _run("import sys; sys.exit(3)").returncode == 3
    # The command is pid 2, not the init, whose own signals would be ignored.
    assert _run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)").returncode == -9
    assert _run("import os; os.abort()").returncode == -signal.SIGABRT


def test_sigterm_to_the_outer_process_reaches_the_command():
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [*private_pids.PREFIX, sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 7


def test_the_given_descriptors_reach_the_command_and_end_with_it():
    read_end, write_end = os.pipe()
    child = subprocess.Popen(
        [*private_pids.PREFIX, sys.executable, "-c", f"import os; os.write({write_end}, b'hi')"],
        pass_fds=[write_end],
    )
    os.close(write_end)
    assert child.wait(timeout=30) == 0
    # EOF once the command is gone: neither waiter keeps a copy open.
    assert os.read(read_end, 10) == b"hi"
    assert os.read(read_end, 10) == b""
    os.close(read_end)


def test_a_process_the_test_leaves_behind_ends_with_it(tmp_path):
    started_at = tmp_path / "orphan"
    code = (
        "import subprocess\n"
        "orphan = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        f"open({str(started_at)!r}, 'w').write(open(f'/proc/{{orphan.pid}}/stat').read())\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    orphan = _start_time(started_at.read_text())  # its pids differ by namespace; this does not
    until = time.monotonic() + 10
    while _alive_started_at(orphan) and time.monotonic() < until:
        time.sleep(0.1)
    assert not _alive_started_at(orphan), "the orphan outlived its test"


def _start_time(stat: str) -> str:
    return stat.rpartition(")")[2].split()[19]  # field 22: clock ticks since boot


def _alive_started_at(start_time: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[0]
        if "(sleep)" in stat and state != "Z" and _start_time(stat) == start_time:
            found.append(pid)
    return found
