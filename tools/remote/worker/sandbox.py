"""Runs one action's command isolated, and owns its processes until they are gone.

Isolation (needs root and bubblewrap, Debian's `bubblewrap`):
  * the staged inputs are the lower layer of an overlay mounted in the worker's private mount
    namespace (enter_private_mount_namespace; its mounts vanish with the worker): the action
    reads and writes its exec root as in Bazel's own sandbox, but every write lands in its
    private upper layer; the staged files, hard links into the worker's file cache shared with
    every other action, are never written;
  * bwrap shows the host read-only (`--ro-bind / /`) with private /tmp, /dev and /proc and no
    capabilities, so nothing the action does reaches the cache, other actions or the host.
Lifetime: bwrap's own pid namespace (`--unshare-pid`) dies with its first process, which dies
with the worker thread that started it (`--die-with-parent`, PR_SET_PDEATHSIG): a killed worker
or `rig.sh down` leaves no test process behind. A timeout sends SIGTERM to every process of the
action (the runner dumps its stacks into the log), then SIGKILL after TERM_GRACE_S.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading

# Like Bazel's --local_termination_grace_seconds (15): time between SIGTERM and SIGKILL.
TERM_GRACE_S = 15

_TOOLS: dict[str, str] = {}


def enter_private_mount_namespace() -> None:
    """Call first in the worker (single-threaded still): its overlays stay its own."""
    if os.geteuid() != 0:
        raise SystemExit("worker: isolating actions needs root (overlay mounts); run it as root")
    for tool in ("bwrap", "mount", "umount"):
        _TOOLS[tool] = shutil.which(tool) or ""
        if not _TOOLS[tool]:
            raise SystemExit(f"worker: {tool} is missing (apt-get install bubblewrap mount)")
    os.unshare(os.CLONE_NEWNS)
    subprocess.run([_TOOLS["mount"], "--make-rprivate", "/"], check=True)


class Sandbox:
    """`inputs` (read-only, staged) seen by the command at `root`, changes kept in `layer`."""

    def __init__(self, inputs: pathlib.Path, layer: pathlib.Path, root: pathlib.Path):
        self._inputs = inputs
        self._upper = layer / "upper"
        self._work = layer / "work"
        self.root = root
        self._process: subprocess.Popen | None = None
        self._pid_namespace_init: int | None = None

    def __enter__(self) -> "Sandbox":
        for path in (self._upper, self._work, self.root):
            path.mkdir(parents=True)
        overlay = f"lowerdir={self._inputs},upperdir={self._upper},workdir={self._work}"
        subprocess.run(
            [_TOOLS["mount"], "-t", "overlay", "overlay", "-o", overlay, self.root], check=True
        )
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
        subprocess.run([_TOOLS["umount"], "--lazy", self.root], check=True)

    def start(self, argv: list[str], cwd: pathlib.Path, env: dict, stdout, stderr) -> None:
        info_read, info_write = os.pipe()
        # fmt: off
        command = [
            _TOOLS["bwrap"], "--die-with-parent", "--unshare-pid", "--unshare-ipc",
            "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", str(self.root), str(self.root), "--chdir", str(cwd),
            "--info-fd", str(info_write), "--", *argv,
        ]
        # fmt: on
        self._process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(info_write,),
            start_new_session=True,
        )
        os.close(info_write)
        with os.fdopen(info_read) as info:  # bwrap writes it once the namespace exists
            text = info.read()
        if text:
            self._pid_namespace_init = json.loads(text)["child-pid"]

    def wait(self, timeout: float | None) -> tuple[int, bool]:
        """(exit code, timed out). On timeout: SIGTERM to all, SIGKILL after TERM_GRACE_S."""
        try:
            return self._process.wait(timeout), False
        except subprocess.TimeoutExpired:
            self.terminate()
            try:
                return self._process.wait(TERM_GRACE_S), True
            except subprocess.TimeoutExpired:
                self.kill()
                return self._process.wait(), True

    def terminate(self) -> None:
        """SIGTERM to the action's own processes (not bwrap's init, which would take all down)."""
        if self._process is None or self._process.poll() is not None:
            return  # its namespace is gone: the init's pid may belong to a host process now
        namespace = self._namespace()
        if namespace is None:
            return
        for entry in pathlib.Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self._pid_namespace_init:
                try:
                    if os.readlink(entry / "ns/pid") == namespace:
                        os.kill(int(entry.name), signal.SIGTERM)
                except OSError:  # gone meanwhile
                    pass

    def kill(self) -> None:
        """SIGKILL: the namespace's init (the kernel then kills every process in it) and bwrap."""
        if self._process is None or self._process.poll() is not None:
            return
        if self._pid_namespace_init:
            try:
                os.kill(self._pid_namespace_init, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.killpg(self._process.pid, signal.SIGKILL)

    def cancel(self) -> None:
        """SIGTERM now, SIGKILL after TERM_GRACE_S, without blocking the caller (the bot's
        session thread, which cancels one action after another)."""
        self.terminate()
        grace = threading.Timer(TERM_GRACE_S, self.kill)
        grace.daemon = True
        grace.start()

    def _namespace(self) -> str | None:
        try:
            return os.readlink(f"/proc/{self._pid_namespace_init}/ns/pid")
        except OSError:
            return None
