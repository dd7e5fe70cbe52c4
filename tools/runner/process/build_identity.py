"""What tells one torch build, or one compiler, from another without reading them whole.

A file's identity is its real path (Bazel's runfiles are links into the output base, so every
sandbox names the same real file), size and modification time: a re-install or an edit in place
gives another. Used by the caches that must never cross builds or compilers
(tools/runner/process/kernel_cache.py, tools/runner/process/vec_isa_memo.py).
"""

import glob
import os
import shutil


def file_identity(path: str) -> list:
    """[real path, size, mtime_ns]."""
    real = os.path.realpath(path)
    info = os.stat(real)
    return [real, info.st_size, info.st_mtime_ns]


def program_identity(name: str, search: str | None = None) -> list:
    """The file identity of a program as a shell finds it on `search` (default PATH)."""
    return file_identity(shutil.which(name, path=search) or name)


def torch_identity(torch_dir: str) -> list:
    """The build of the torch package in `torch_dir`: its version file and its native libraries,
    which compiled kernels are built against and load (headers come with them)."""
    files = [os.path.join(torch_dir, "version.py")]
    files += sorted(glob.glob(os.path.join(torch_dir, "_C*.so")))
    files += sorted(glob.glob(os.path.join(torch_dir, "lib", "*.so*")))
    return [file_identity(f) for f in files]
