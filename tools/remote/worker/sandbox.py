"""Runs one action's command isolated, and owns its processes until they are gone.

Isolation (needs root and bubblewrap, Debian's `bubblewrap`):
  * the staged inputs are the lower layer of an overlay mounted in the worker's private mount
    namespace (enter_private_mount_namespace; its mounts vanish with the worker): the action
    reads and writes its exec root as in Bazel's own sandbox, but every write lands in its
    private upper layer; the staged files, hard links into the worker's file cache shared with
    every other action, are never written;
  * bwrap shows the host read-only (`--ro-bind / /`) with private /tmp, /dev and /proc and no
    capabilities, so nothing the action does reaches the cache, other actions or the host.
Staging without overlay: where the kernel has no overlayfs for us (a gVisor sandbox, say; probed
once at start, logged), the staged tree is copied into the exec root instead: slower, and the
copies are the action's own, so the file cache stays untouched as well.
GPU pools (`gpu_exposure`): the host's NVIDIA device nodes are bound into the sandbox's /dev, and
the GPU lease's lock folder (tools/runner/gpu_lease.py) is the host's, shared by every sandbox
of the host and by local tests (the worker's TORCH_TEST_GPU_LEASE_DIR, else the default, set
in the action whatever it asked): the runner inside each action leases its GPUs there, so two
actions never hold the same GPU. The driver's libraries are where the host has them (the host is
visible read-only).
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
import tempfile
import threading

from tools.hardware import envvars
from tools.runner import gpu_lease

# Like Bazel's --local_termination_grace_seconds (15): time between SIGTERM and SIGKILL.
TERM_GRACE_S = 15

_TOOLS: dict[str, str] = {}
# Whether actions' exec roots are overlays (else copies); decided once, at start.
_STAGING = {"overlay": True}


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
    _STAGING["overlay"] = _overlay_works()


def staging_mode() -> str:
    return "overlay" if _STAGING["overlay"] else "copy"


def _overlay_works() -> bool:
    """Mounts and unmounts one overlay; False (and says why) where the kernel refuses."""
    with tempfile.TemporaryDirectory(prefix="rig-overlay-probe-") as probe:
        dirs = [pathlib.Path(probe, d) for d in ("lower", "upper", "work", "root")]
        for d in dirs:
            d.mkdir()
        lower, upper, work, root = dirs
        options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        mounted = subprocess.run(
            [_TOOLS["mount"], "-t", "overlay", "overlay", "-o", options, root],
            capture_output=True,
            text=True,
        )
        if mounted.returncode:
            print(f"worker: no overlay mounts here ({mounted.stderr.strip()}): copying inputs")
            return False
        subprocess.run([_TOOLS["umount"], root], check=True)
        return True


def gpu_exposure(
    dev: pathlib.Path = pathlib.Path("/dev"), lease_dir: str | None = None
) -> list[str]:
    """bwrap arguments that give an action the host's NVIDIA devices and GPU lease folder.

    Every /dev/nvidia* node (nvidiactl, nvidia-uvm, nvidia0..N, ...) and the /dev/nvidia-caps
    folder, at the same paths; the runner's lease inside the action picks its GPUs
    (CUDA_VISIBLE_DEVICES) from the folder every action of this host shares.
    """
    nodes = sorted(dev.glob("nvidia*"))
    if not nodes:
        raise SystemExit(f"worker: --gpu-devices, but no {dev}/nvidia* here")
    args = []
    for node in nodes:
        args += ["--dev-bind", str(node), str(pathlib.Path("/dev") / node.name)]
    lease = gpu_lease.lease_dir({envvars.GPU_LEASE_DIR: lease_dir} if lease_dir else os.environ)
    # The action's own TORCH_TEST_GPU_LEASE_DIR (a --test_env) would lease apart from the host's
    # other actions: inside the sandbox the host's folder is the one.
    return args + [
        "--bind",
        str(lease),
        str(lease),
        "--setenv",
        envvars.GPU_LEASE_DIR,
        str(lease),
    ]


class Sandbox:
    """`inputs` (read-only, staged) seen by the command at `root`, changes kept in `layer`."""

    def __init__(
        self,
        inputs: pathlib.Path,
        layer: pathlib.Path,
        root: pathlib.Path,
        extra_args: list[str] = (),
    ):
        self._inputs = inputs
        self._extra_args = list(extra_args)  # e.g. gpu_exposure()
        self._upper = layer / "upper"
        self._work = layer / "work"
        self.root = root
        self._process: subprocess.Popen | None = None
        self._pid_namespace_init: int | None = None

    def __enter__(self) -> "Sandbox":
        if not _STAGING["overlay"]:
            shutil.copytree(self._inputs, self.root, symlinks=True)  # copies: the action's own
            return self
        for path in (self._upper, self._work, self.root):
            path.mkdir(parents=True)
        overlay = f"lowerdir={self._inputs},upperdir={self._upper},workdir={self._work}"
        subprocess.run(
            [_TOOLS["mount"], "-t", "overlay", "overlay", "-o", overlay, self.root], check=True
        )
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
        if _STAGING["overlay"]:
            subprocess.run([_TOOLS["umount"], "--lazy", self.root], check=True)

    def start(self, argv: list[str], cwd: pathlib.Path, env: dict, stdout, stderr) -> None:
        info_read, info_write = os.pipe()
        # fmt: off
        command = [
            _TOOLS["bwrap"], "--die-with-parent", "--unshare-pid", "--unshare-ipc",
            "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            *self._extra_args,
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
