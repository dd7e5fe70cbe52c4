"""Inductor's CPU vector-ISA probes, run once per host instead of once in every test process.

Before its first CPU compile, each process's inductor checks every vector ISA the CPU reports
(AVX2, AVX-512, VNNI, AMX, ...): it builds a probe into the kernel cache and loads it in a child
Python (VecISA.check_build), one process at a time under inductor's lock. Before torch 2.13 that
child imports torch, so on the torch 2.11 image every shard's first compile pays for several
torch imports, and shards that start together queue behind each other's
(bench/results/host_suite_2026-11-25_nvidia-h100-x1.md).

Here every probe that passed is kept as a file named by a digest of what its answer depends
on: the torch build, the interpreter, the compiler binary, the kernel and CPU flags, and the
probe's code, flags and macros. A process that finds its probe's file takes the pass without
probing; the first process to need a probe runs torch's own check under a lock of ours, so the
others wait for its answer instead of probing again. Only passes are kept: a probe that failed
or timed out is checked again by the next process, as torch would.
A kept pass that no longer holds cannot pass a test: inductor then builds kernels with flags
the compiler or the CPU rejects, and the test fails (a compile error or an illegal instruction).
Where a fact of the key cannot be read (another torch's internals) or the folder cannot be
written, the check is torch's own; so it is where the folder is not this user's alone
(tools/runner/process/private_dirs.py): its entries are never read, and the summary line says why.

TORCH_TEST_VEC_ISA_MEMO: the folder (default below); "off": torch's own check in every process.
watch() (the test plugin, the rank processes) patches inductor when its module is imported, so
a process that never compiles on the CPU pays nothing.
"""

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import pathlib
import platform
import sys

from tools.hardware import envvars
from tools.runner.process import build_identity, on_import, private_dirs

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["summary", "watch"]

MODULE = "torch._inductor.cpu_vec_isa"
OFF = "off"
# Beside the kernel caches (tools/runner/process/kernel_cache.py), but kept when those are emptied:
# the answer is the host's, not a kernel's. Private (tools/runner/process/private_dirs.py); the name
# changed when that rule came, so folders made before it are never read.
DEFAULT_DIR = f"/tmp/torch_tests_vec_isa_memo_{os.getuid()}"
_PATCHED = "_torch_test_vec_isa_memo"

# This process's probes: answered from the memo, or checked by torch.
taken: list[str] = []
checked: list[str] = []
refused: list[str] = []


def folder(env=os.environ) -> pathlib.Path | None:
    value = env.get(envvars.VEC_ISA_MEMO, DEFAULT_DIR)
    return None if value == OFF else pathlib.Path(value)


def ensure_private(env=os.environ) -> None:
    """Creates the folder private, or raises private_dirs.NotPrivate (the runner's check, which
    fails the target up front instead of falling back to torch's check in every process)."""
    where = folder(env)
    if where is not None:
        private_dirs.ensure(where)


def watch(env=os.environ) -> None:
    """Patches inductor's check now if it is imported, else when it is."""
    where = folder(env)
    if where is not None:
        on_import.when_imported(MODULE, install, where)


def install(module, where: pathlib.Path) -> None:
    vec_isa = getattr(module, "VecISA", None)
    original = getattr(vec_isa, "check_build", None)
    if original is None or getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def check_build(isa, code: str) -> bool:
        return memoized(where, isa, code, lambda: original(isa, code))

    setattr(check_build, _PATCHED, True)
    vec_isa.check_build = check_build


def memoized(where: pathlib.Path, isa, code: str, check) -> bool:
    """`check()`'s answer for this probe: a kept pass, or the check's (kept if it passed)."""
    try:
        private_dirs.ensure(where)
    except private_dirs.NotPrivate as error:
        _refused_once(str(error))
        checked.append(str(isa))
        return check()
    except OSError:  # cannot be made: torch's own check
        return check()
    try:
        facts = probe_facts(isa, code)
    except Exception:  # noqa: BLE001 - any missing fact means torch's own check
        return check()
    passed = where / digest(facts)
    if passed.exists():
        taken.append(str(isa))
        return True
    with _locked(passed.with_suffix(".lock")):
        if passed.exists():  # another process checked it while we waited
            taken.append(str(isa))
            return True
        ok = check()
        checked.append(str(isa))
        if ok:
            _write_atomically(passed, json.dumps(facts, indent=1))
    return ok


def _refused_once(message: str) -> None:
    # Said once, after the tests (summary): torch's own check answers meanwhile.
    if message not in refused:
        refused.append(message)


def probe_facts(isa, code: str) -> dict:
    """Everything a probe's answer depends on."""
    import torch
    from torch._inductor import cpp_builder

    return {
        "torch": [torch.__version__, torch.version.git_version, os.path.realpath(torch.__file__)],
        "python": os.path.realpath(sys.executable),
        "compiler": build_identity.program_identity(cpp_builder.get_cpp_compiler()),
        "host": [platform.release(), platform.machine(), _cpu_flags()],
        "probe": [
            type(isa).__name__,
            str(isa),
            isa.build_arch_flags(),
            list(isa.build_macro()),
            code,
        ],
    }


def digest(facts: dict) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


def summary() -> str | None:
    """One log line: where this process's probe answers came from."""
    if not taken and not checked:
        return None
    line = f"torch_test vec-isa probes: {len(taken)} kept in {folder()}, {len(checked)} checked"
    return "\n".join([line, *(f"torch_test vec-isa memo: {why}" for why in refused)])


def _cpu_flags() -> str:
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.split(":")[0].strip() in ("flags", "Features"):
                return line.split(":", 1)[1].strip()
    return ""


@contextlib.contextmanager
def _locked(path: pathlib.Path):
    # flock: released by the kernel if the holder dies, so no stale lock outlives a crash.
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _write_atomically(path: pathlib.Path, text: str) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, path)
