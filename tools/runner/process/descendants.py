"""The test process's checks in every Python process its tests start, whoever starts them.

The test process installs them itself (tools/runner/session/child.py and the test plugin), as
do the ranks of test_utils.distributed (calling `install`). Any other Python process a test
starts is a fresh interpreter that would run without them: a rank of torch's
MultiProcessTestCase (spawned), a test's `subprocess.run([sys.executable, ...])`. Such a process
could read an undeclared source file and keep the target's cached PASSED, use GPU memory past
its lease's share and report no peak (so its target never shares a GPU), and probe inductor's
vector ISAs again.

Python imports `sitecustomize` from its path when it starts (site.py), so the test process puts
SITE (site/sitecustomize.py beside this file) first on PYTHONPATH for the processes it starts
(`export`), and that module calls `install` in each of them:
  - the read audit, on the test's record (tools/runner/process/read_audit.py);
  - inductor's vector-ISA memo and kernel keys, when inductor is imported;
  - once torch is imported: the lease's GPU memory cap, and at exit the process's peak GPU
    memory, left in a folder the test process reads as it reads its ranks' (gpu_peak.py).
An interpreter started with -I, -E or -S, or without PYTHONPATH, or older than Python 3.10,
skips it, as a process that is not Python does: what those read is not audited. The
interpreter's own sitecustomize, if any, still runs after ours. Standard library only until
torch is imported.
"""

import atexit
import os
import tempfile

from tools.hardware import envvars
from tools.runner.process import (
    gpu_peak,
    kernel_cache,
    memory_cap,
    on_import,
    process_env,
    read_audit,
    vec_isa_memo,
)

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def export(env=os.environ) -> None:
    """In the test process: the processes it starts from now on run `install` (and leave their
    GPU peaks in a folder of this test's temporary directory)."""
    peaks = tempfile.mkdtemp(prefix="descendant_peaks_", dir=env.get("TEST_TMPDIR"))
    path = env.get("PYTHONPATH")
    process_env.export(
        {
            "PYTHONPATH": SITE + (os.pathsep + path if path else ""),
            envvars.DESCENDANT_PEAKS: peaks,
        }
    )


def install(env=os.environ) -> None:
    """In a process a test started (site/sitecustomize.py)."""
    read_audit.install(env)
    vec_isa_memo.watch(env)
    kernel_cache.watch(env)
    peaks = env.get(envvars.DESCENDANT_PEAKS)
    on_import.when_imported("torch", _with_torch, peaks)


def _with_torch(_torch, peaks: str | None) -> None:
    memory_cap.cap_gpu_memory()  # queued for CUDA's initialisation: no context if never used
    if peaks:
        atexit.register(_leave_peak, peaks)


def _leave_peak(peaks: str) -> None:
    peak = gpu_peak.peak_mib()
    if peak is not None:
        # Whole or not at all: the test process reads every *.mib left (gpu_peak.py).
        partial = os.path.join(peaks, f"{os.getpid()}.partial")
        with open(partial, "w") as f:
            f.write(str(peak))
        os.replace(partial, os.path.join(peaks, f"{os.getpid()}{gpu_peak.PEAK_SUFFIX}"))
