"""Self-tests of the GPU memory watch (tools/runner/gpu_watch.py), with a fake `nvidia-smi` on
PATH that prints the rows a test chose, and real processes for the process tree."""

import contextlib
import os
import pathlib
import subprocess
import sys
import time

import pytest

from tools.runner import gpu_watch

INTERVAL = 0.02


class FakeSmi:
    """`nvidia-smi` on PATH: prints `apps` for --query-compute-apps, `gpus` for --query-gpu,
    exits with `status`, and logs each call's arguments."""

    def __init__(self, folder: pathlib.Path):
        self.folder = folder
        (folder / "bin").mkdir()
        script = folder / "bin" / "nvidia-smi"
        script.write_text(
            "#!/bin/sh\n"
            f'echo "$*" >> {folder}/calls\n'
            'case "$*" in\n'
            f"  *query-compute-apps*) cat {folder}/apps ;;\n"
            f"  *query-gpu*) cat {folder}/gpus ;;\n"
            "esac\n"
            f"exit $(cat {folder}/status)\n"
        )
        script.chmod(0o755)
        self.set("apps", "")
        self.set("gpus", "")
        self.set("status", "0")

    def set(self, name: str, text: str) -> None:
        partial = self.folder / f"{name}.partial"
        partial.write_text(text)
        partial.replace(self.folder / name)  # whole, as the fake reads it

    def calls(self) -> list[str]:
        path = self.folder / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def sampled(self, more: int = 2) -> None:
        """Waits until the watch asked `more` times from now: it has seen what was set."""
        target = len(self.calls()) + more
        deadline = time.monotonic() + 20
        while len(self.calls()) < target:
            assert time.monotonic() < deadline, "the watch stopped sampling"
            time.sleep(INTERVAL)


@pytest.fixture
def smi(tmp_path, monkeypatch):
    fake = FakeSmi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return fake


@pytest.fixture
def tree():
    """(child, grandchild) pids: a process this test started, and one that process started."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, time\n"
            "grandchild = subprocess.Popen(['sleep', '60'])\n"
            "print(grandchild.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    grandchild = int(child.stdout.readline())
    try:
        yield child.pid, grandchild
    finally:
        for pid in (grandchild, child.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        child.wait()
        child.stdout.close()


def _rows(*rows) -> str:
    return "".join(", ".join(map(str, row)) + "\n" for row in rows)


def test_the_tree_is_the_root_and_all_its_descendants(tree):
    child, grandchild = tree
    me = os.getpid()
    assert gpu_watch.parent(grandchild) == child and gpu_watch.parent(child) == me
    assert gpu_watch.in_tree(me, me) and gpu_watch.in_tree(child, me)
    assert gpu_watch.in_tree(grandchild, me), "a grandchild is in the tree"
    assert gpu_watch.in_tree(grandchild, child)
    assert not gpu_watch.in_tree(child, grandchild), "a parent is not in its child's tree"
    assert not gpu_watch.in_tree(os.getppid(), me), "nor is the root's own parent"
    assert not gpu_watch.in_tree(1, me)


def test_a_gone_process_is_in_no_tree():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert gpu_watch.parent(gone.pid) is None
    assert not gpu_watch.in_tree(gone.pid, os.getpid())


def test_the_parent_is_read_past_a_name_with_parentheses_and_spaces():
    # /proc/<pid>/stat holds the name in parentheses; a process may name itself "x) 1 (y".
    renamed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes, time\n"
            "ctypes.CDLL(None).prctl(15, b'x) 1 (y', 0, 0, 0)\n"  # PR_SET_NAME
            "print(flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        renamed.stdout.readline()
        assert "x) 1 (y" in pathlib.Path(f"/proc/{renamed.pid}/stat").read_text()
        assert gpu_watch.parent(renamed.pid) == os.getpid()
    finally:
        renamed.kill()
        renamed.wait()
        renamed.stdout.close()


def test_by_process_the_peak_is_the_trees_memory_on_its_busiest_gpu(smi, tree, monkeypatch):
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: True)
    child, grandchild = tree
    outsider = os.getppid()  # another test's process, as far as this tree goes
    smi.set("apps", _rows(("GPU-a", child, 1000), ("GPU-a", outsider, 70000)))
    with gpu_watch.watch([0, 1], whole=False, interval=INTERVAL) as watched:
        smi.sampled()
        # The peak: a grandchild's memory (a rank of any launcher) adds to its GPU's.
        smi.set(
            "apps",
            _rows(
                ("GPU-a", child, 2000),
                ("GPU-a", grandchild, 500),
                ("GPU-b", grandchild, 2400),
                ("GPU-b", outsider, 70000),
                ("GPU-b", child, "[N/A]"),  # the driver could not tell: not counted
            ),
        )
        smi.sampled()
        smi.set("apps", _rows(("GPU-a", child, 100)))  # after the peak: kept
        smi.sampled()
    assert (watched.how, watched.peak_mib) == ("by process", 2500)
    assert all("--query-compute-apps=gpu_uuid,pid,used_memory" in c for c in smi.calls())


def test_a_tree_that_used_no_gpu_memory_has_a_peak_of_zero(smi, monkeypatch):
    # A probe that never imports torch: measured, so its target shares GPUs next time.
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: True)
    smi.set("apps", _rows(("GPU-a", os.getppid(), 5000)))
    with gpu_watch.watch([0], whole=True, interval=INTERVAL) as watched:
        smi.sampled()
    assert watched.peak_mib == 0


def test_by_gpu_a_whole_lease_counts_its_gpus_memory_above_where_it_began(smi, monkeypatch):
    # In a pid namespace of its own (Bazel's sandbox) the driver's pids are not the runner's.
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: False)
    smi.set("gpus", _rows((2, 700), (3, 900)))  # before the test: the baseline
    with gpu_watch.watch([2, 3], whole=True, interval=INTERVAL) as watched:
        smi.sampled()
        smi.set("gpus", _rows((2, 4700), (3, 1900)))
        smi.sampled()
        smi.set("gpus", _rows((2, 500), (3, 900)))  # below the baseline: nothing, not negative
        smi.sampled()
    assert (watched.how, watched.peak_mib) == ("by GPU", 4000)
    assert all("--query-gpu=index,memory.used -i 2,3" in c for c in smi.calls())


def test_a_shared_lease_in_a_namespace_of_its_own_measures_nothing(smi, monkeypatch):
    # Its GPUs hold other tests' memory too, and no pid tells which is whose.
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: False)
    with gpu_watch.watch([0], whole=False, interval=INTERVAL) as watched:
        time.sleep(5 * INTERVAL)
    assert watched.peak_mib is None and "not measured" in watched.how
    assert smi.calls() == []


def test_a_gpu_whose_memory_nvidia_smi_cannot_tell_gives_no_peak(smi, monkeypatch):
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: False)
    smi.set("gpus", _rows((0, "[N/A]")))
    with gpu_watch.watch([0], whole=True, interval=INTERVAL) as watched:
        smi.sampled()
    assert watched.peak_mib is None, "not a measured 0: the target would share on nothing"


@pytest.mark.parametrize("by_process", [True, False])
def test_without_an_answer_from_nvidia_smi_there_is_no_peak(smi, monkeypatch, by_process):
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: by_process)
    smi.set("apps", _rows(("GPU-a", os.getpid(), 1000)))
    smi.set("gpus", _rows((0, 1000)))
    smi.set("status", "9")  # failed: what it printed is not an answer
    with gpu_watch.watch([0], whole=True, interval=INTERVAL) as watched:
        smi.sampled()
    assert watched.peak_mib is None and "no answer" in watched.how


def test_without_nvidia_smi_there_is_no_peak(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_watch, "pids_are_the_drivers", lambda: True)
    with gpu_watch.watch([0], whole=True, interval=INTERVAL) as watched:
        time.sleep(3 * INTERVAL)
    assert watched.peak_mib is None
