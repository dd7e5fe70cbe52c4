"""The test process's checks in every Python process its tests start, whoever starts them.

The test process installs them itself (tools/runner/session/child.py and the test plugin), as
do the ranks of test_utils.distributed (calling `install`). Any other Python process a test
starts is a fresh interpreter that would run without them: a rank of torch's
MultiProcessTestCase (spawned), a test's `subprocess.run([sys.executable, ...])`. Such a process
could read an undeclared source file and keep the target's cached PASSED, use GPU memory past
its lease's share, and probe inductor's vector ISAs again.

Python imports `sitecustomize` from its path when it starts (site.py), so the test process puts
SITE (site/sitecustomize.py beside this file) first on PYTHONPATH for the processes it starts
(`export`), and that module calls `install` in each of them:
  - the witness: a rank of torch's MultiProcessTestCase reports its body
    (tools/runner/process/witness.py);
  - inductor's vector-ISA memo and kernel keys, when inductor is imported;
  - once torch is imported: the lease's GPU memory cap (memory_cap.py).
An interpreter started with -I, -E or -S, or without PYTHONPATH, or older than Python 3.10,
skips it, as a process that is not Python does: what those read is not audited. The
interpreter's own sitecustomize, if any, still runs after ours. Standard library only until
torch is imported.
"""

import os

from tools.runner.process import (
    kernel_cache,
    memory_cap,
    on_import,
    process_env,
    vec_isa_memo,
    witness,
)

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def export(env=os.environ) -> None:
    """In the test process: the processes it starts from now on run `install`."""
    path = env.get("PYTHONPATH")
    process_env.export({"PYTHONPATH": SITE + (os.pathsep + path if path else "")})


def install(env=os.environ) -> None:
    """In a process a test started (site/sitecustomize.py)."""
    witness.install_descendant(env)  # ranks of torch's MultiProcessTestCase report their bodies
    vec_isa_memo.watch(env)
    kernel_cache.watch(env)
    on_import.when_imported("torch", _with_torch)


def _with_torch(_torch) -> None:
    memory_cap.cap_gpu_memory()  # queued for CUDA's initialisation: no context if never used
