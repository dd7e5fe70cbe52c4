"""Inductor's compiled kernels, shared by every test of this user across targets and runs.

Why kernels were compiled again in every target and every run: inductor keys a C++ kernel by
its source and its compile command (codecache.write), and the command names torch's include and
library folders by the path torch was imported from. Under Bazel that path lies in the test's
runfiles inside its sandbox (/dev/shm/.../linux-sandbox/<N>/execroot/...), a new <N> for every
test action, so the same kernel got a new key in each target and each run.

Here each test process (watch(): the test plugin, the rank processes) computes that key with
the torch folder's path replaced by the identity of the torch build found there and the
compiler's identity added (build_identity.py): a kernel is reused when torch would
reuse it in one process (same source, same flags, same torch, same compiler), and never across
torch builds or compilers. Only the key changes; the compile uses the real paths.

Precompiled headers: before compiling a CPU kernel, inductor precompiles its prefix header
(a .gch of some 150 MB, seconds of compile) into tempfile's folder, not its cache folder, so it
lasts as long as TMPDIR, and the runner gives every run a fresh TMPDIR (private_tmp.py): every
test process compiled the header again, even where all its kernels were found. They go beside
the kernels instead (TORCHINDUCTOR_CACHE_DIR/precompiled_headers, as the process found that
variable when watch() ran, so a test's fresh_cache() does not move them). Inductor keys a
header by its preprocessed text, its compile command and the compiler's version; the text
holds the torch folder too (headers' __FILE__), so the preprocessor's output, made only to be
hashed, gets the same replacement before inductor hashes it, and the key the same patched write.

Whole outputs only: inductor compiles straight to the kernel's (or header's) final path and
takes any file there as built (codecache._worker_compile_cpp), so a compile stopped midway (a
Bazel TIMEOUT, a kill, an OOM) left a truncated .so that every later test loading that kernel
failed on ("file too short"), in every target of this user and every run, since the folder is
shared. Each build now writes beside its target and renames the whole file into place; a
part whose process was killed before the rename is removed by a later build in its folder
once it is older than any compile (STALE_PARTIAL_S).

Folders: the runner points TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (unless set) at
ROOT/<digest of the torch build and the compiler on PATH>/, so processes this patch does not
reach (ranks started by torch's own launchers, whose keys still hold their sandbox's path)
never meet another build's kernels either, even where sandbox paths repeat. ROOT is private to
its user (tools/runner/process/private_dirs.py): a folder others made or may use is refused.
"""

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import pathlib
import threading
import time

from tools.runner.process import build_identity, on_import, private_dirs

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["ROOT"]

ROOT = pathlib.Path(f"/tmp/torch_tests_kernels_{os.getuid()}")
MODULE = "torch._inductor.codecache"
_PATCHED = "_torch_test_kernel_cache"
_PATCHED_BUILD = "_torch_test_whole_outputs"
HEADERS = "precompiled_headers"
PARTIAL = ".partial-"
# Older than any compile: a part this old belongs to a process that was killed mid-build.
STALE_PARTIAL_S = 3600


def configure(env) -> None:
    """Points inductor's and triton's caches (unless set) at this build's folder under ROOT;
    raises private_dirs.NotPrivate if ROOT is not this user's alone."""
    if "TORCHINDUCTOR_CACHE_DIR" in env and "TRITON_CACHE_DIR" in env:
        return
    build = private_dirs.ensure(ROOT) / build_digest(env)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(build / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(build / "triton"))


def build_digest(env) -> str:
    """The torch build this interpreter imports (found, not imported) and the compiler that
    inductor runs by default (CXX, else g++ on the test's PATH)."""
    spec = importlib.util.find_spec("torch")
    torch_dir = os.path.dirname(spec.origin) if spec and spec.origin else None
    facts = {
        "torch": build_identity.torch_identity(torch_dir) if torch_dir else None,
        "compiler": _compiler_or_none(env.get("CXX", "g++"), env.get("PATH")),
    }
    return _digest(facts)


def watch(env=os.environ) -> None:
    """Patches inductor's kernel keys and header folder now if its code cache is imported,
    else when it is."""
    on_import.when_imported(MODULE, install, headers_folder(env))


def headers_folder(env) -> str | None:
    """Where precompiled headers are kept: beside this process's kernels."""
    kernels = env.get("TORCHINDUCTOR_CACHE_DIR")
    return os.path.join(kernels, HEADERS) if kernels else None


def install(codecache, headers: str | None = None) -> None:
    if hasattr(codecache, "CppBuilder"):
        _whole_outputs_only(codecache.CppBuilder)
    if headers and hasattr(codecache, "_HEADER_DIR"):  # torch builds that precompile headers
        codecache._HEADER_DIR = headers
        codecache._HEADER_LOCK_DIR = os.path.join(headers, "locks")
        _key_preprocessing_without_sandbox(codecache.CppBuilder)
    original = codecache.write
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def write(content, extension, extra="", *args, **kwargs):
        return original(content, extension, sandbox_free(extra), *args, **kwargs)

    setattr(write, _PATCHED, True)
    codecache.write = write


def _whole_outputs_only(builder) -> None:
    original = builder.build
    if getattr(original, _PATCHED_BUILD, False):
        return

    @functools.wraps(original)
    def build(self, *args, **kwargs):
        target = getattr(self, "_target_file", None)
        output = getattr(self, "_output", None)
        # The builder's output flag ends with its target's path (torch's CppBuilder, POSIX); a
        # builder of another shape builds as torch has it (test_kernel_cache holds the shape).
        if not target or not isinstance(output, str) or not output.endswith(" " + target):
            return original(self, *args, **kwargs)
        folder, name = os.path.split(target)
        partial = os.path.join(folder, f"{PARTIAL}{os.getpid()}-{threading.get_ident()}-{name}")
        self._target_file, self._output = partial, output[: -len(target)] + partial
        try:
            result = original(self, *args, **kwargs)
            os.replace(partial, target)
            _remove_stale_partials(folder)
            return result
        finally:
            self._target_file, self._output = target, output
            if os.path.lexists(partial):
                os.unlink(partial)

    setattr(build, _PATCHED_BUILD, True)
    builder.build = build


def _remove_stale_partials(folder: str) -> None:
    """Parts left by test processes killed mid-build (a rename never came); never one that
    another process may still be writing."""
    now = time.time()
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(PARTIAL):
                with contextlib.suppress(OSError):  # another process removed it first
                    if now - entry.stat(follow_symlinks=False).st_mtime > STALE_PARTIAL_S:
                        os.unlink(entry.path)


def _key_preprocessing_without_sandbox(builder) -> None:
    original = builder.build
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def build(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if getattr(self, "_preprocessing", False):  # output read only to key a header
            output = pathlib.Path(self.get_target_file_path())
            text = output.read_bytes()
            torch_dir = _torch_dir().encode()
            if torch_dir in text:
                output.write_bytes(text.replace(torch_dir, _torch_placeholder().encode()))
        return result

    setattr(build, _PATCHED, True)
    builder.build = build


def sandbox_free(extra: str) -> str:
    """A key's extra text with this process's torch folder replaced by its build's identity,
    and the compiler's identity added; any other text unchanged."""
    torch_dir = _torch_dir()
    if not extra or not isinstance(extra, str) or torch_dir not in extra:
        return extra  # not a compile command of torch's
    return f"{extra.replace(torch_dir, _torch_placeholder())} <cxx {_compiler_digest()}>"


@functools.cache
def _torch_dir() -> str:
    import torch

    # As torch.utils.cpp_extension computes the folder it puts on the command line.
    return os.path.dirname(os.path.abspath(torch.__file__))


@functools.cache
def _torch_placeholder() -> str:
    """What keys hold instead of this process's torch folder: its build's identity."""
    return f"<torch {_digest(build_identity.torch_identity(_torch_dir()))}>"


def _compiler_digest() -> str:
    from torch._inductor import cpp_builder

    return _compiler_digest_of(cpp_builder.get_cpp_compiler())


@functools.cache
def _compiler_digest_of(compiler: str) -> str:
    return _digest(build_identity.program_identity(compiler))


def _compiler_or_none(name: str, search: str | None):
    try:
        return build_identity.program_identity(name, search)
    except OSError:
        return None  # no compiler: nothing compiles


def _digest(facts) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
