"""A short fingerprint of the files a Python environment can import, by content.

Run by the interpreter it fingerprints (tools/python/env_fingerprint.sh starts it with -I -B):
  default        every file in every directory on its sys.path (stdlib, lib-dynload,
                 site-packages, directories .pth files add) and every source of an editable
                 install (editable_sources: setuptools' finders, .egg-link): host mode
  --stdlib-only  its stdlib and lib-dynload only (started with -S: no site directories): the
                 interpreter a pinned @pypi venv links to
plus, either way, the interpreter's binary and libpython, and nvidia-smi's GPU list with the
driver version.

Each file counts by path and content digest (sha256), so a patched file keeps or loses its size
and mtime (`cp -p`, `touch -r`, `rsync -a`, image layers with normalised timestamps) and still
changes the fingerprint; symlinks count by target. Nothing host-specific (inode, ctime, mtime)
is in the fingerprint, so identical images on different hosts share cached results.

Hashing ~36k files on every Bazel command would be too slow, so digests are memoised locally
(~/.cache/torch_tests/fingerprint/, one file per interpreter) keyed by the file's stat: path,
inode, size, mtime and ctime in ns. Every write to a file, `cp -p` and `touch -r` included,
sets its ctime to now, which no user can set back, so a changed file is always hashed again;
the memo is only a shortcut to the same digests. An unwritable memo just means hashing.
Cost: bench/fingerprint_cost.sh (cold: every file read; warm: one stat per file).

Left out: __pycache__ (Python validates bytecode against its source; running the interpreter
writes them), directories' own stats (entries are listed), and site directories of a base
interpreter that are not on this one's sys.path (a venv's base). Standard library only.
"""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig

MEMO_DIR = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torch_tests", "fingerprint"
)
_SITE_DIRS = ("site-packages", "dist-packages")


def editable_sources() -> list[str]:
    """Directories and files of editable installs that sys.path does not name.

    An editable install imports its sources from the project, wherever that is: a .pth path
    puts it on sys.path (walked anyway), but setuptools' finders (`__editable___*_finder`,
    which its .pth installs at startup) map each top-level name to a directory or file
    (MAPPING) and namespaces to directories (NAMESPACES), and `setup.py develop`'s .egg-link
    names the project's directory.
    """
    found = []
    for name, module in list(sys.modules.items()):
        if name.startswith("__editable___") and name.endswith("_finder"):
            found += list(getattr(module, "MAPPING", {}).values())
            for paths in getattr(module, "NAMESPACES", {}).values():
                found += list(paths)
    for site_dir in sys.path:
        if os.path.basename(site_dir) not in _SITE_DIRS or not os.path.isdir(site_dir):
            continue
        for entry in sorted(os.listdir(site_dir)):
            if entry.endswith(".egg-link"):
                with open(os.path.join(site_dir, entry)) as f:
                    first = f.readline().strip()
                if first:
                    found.append(os.path.join(site_dir, first))
    return found


def layout() -> tuple[list[str], list[str]]:
    """(roots to walk, directories under them to prune), from sys.path and editable installs.
    A root may be a file (a single-module editable install)."""
    named = [p for p in sys.path if p] + editable_sources()
    paths = sorted({os.path.realpath(p) for p in named if os.path.exists(p)})
    roots = [p for p in paths if not any(p.startswith(r + "/") for r in paths)]
    prune = []
    for root in roots:
        for name in _SITE_DIRS:
            nested = os.path.join(root, name)
            if os.path.isdir(nested) and nested not in paths:
                prune.append(nested)
    return roots, prune


def interpreter_files() -> list[str]:
    """The binary and, where Python is built shared, the libpython it loads."""
    files = [os.path.realpath(sys.executable)]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        lib = os.path.join(
            sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or ""
        )
        if os.path.isfile(lib):
            files.append(os.path.realpath(lib))
    return files


def walk(roots: list[str], prune: set[str]):
    """(path, os.stat_result) of every non-directory under roots (or a root itself, if it is
    not a directory); symlinks not followed."""
    stack = []
    for root in reversed(roots):
        if os.path.isdir(root):
            stack.append(root)
    for root in roots:
        if not os.path.isdir(root):
            yield root, os.stat(root, follow_symlinks=False)
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__" and entry.path not in prune:
                    subdirs.append(entry.path)
            else:
                yield entry.path, entry.stat(follow_symlinks=False)
        stack.extend(reversed(subdirs))


def _memo_path(roots: list[str]) -> str:
    key = hashlib.sha256("\n".join([sys.executable, *roots]).encode()).hexdigest()[:16]
    return os.path.join(MEMO_DIR, key + ".json")


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save(path: str, memo: dict) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(memo, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the next run hashes again


def _digest(path: str) -> str:
    h = hashlib.sha256()  # not hashlib.file_digest: interpreters before 3.11 are fingerprinted too
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class Digests:
    """Content digests, memoised by stat (the memo never enters the fingerprint)."""

    def __init__(self, memo_path: str):
        self.path, self.old, self.new = memo_path, _load(memo_path), {}

    def of(self, path: str, st: os.stat_result) -> str:
        key = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        known = self.old.get(path)
        if known and known[:4] == key:
            digest = known[4]
        else:
            try:
                digest = _digest(path)
            except OSError as error:  # unreadable: its name and the error still count
                digest = f"unreadable ({error.strerror})"
        self.new[path] = [*key, digest]
        return digest

    def save(self) -> None:
        if self.new != self.old:
            _save(self.path, self.new)


def record(path: str, st: os.stat_result, digests: Digests) -> str:
    if stat.S_ISLNK(st.st_mode):
        return f"{path} -> {os.readlink(path)}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} special {stat.S_IFMT(st.st_mode)}"
    return f"{path} {st.st_size} {digests.of(path, st)}"


def gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    query = [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return out.stdout.splitlines()


def records() -> list[str]:
    roots, prune = layout()
    digests = Digests(_memo_path(roots))
    lines = [sys.version.replace("\n", " ")]
    lines += [f"root {r}" for r in roots] + [f"prune {p}" for p in prune]
    for path in interpreter_files():
        lines.append("interpreter " + record(path, os.stat(path), digests))
    lines += [record(path, st, digests) for path, st in walk(roots, set(prune))]
    digests.save()
    return lines + [f"gpu {g}" for g in gpus()]


def main(argv: list[str]) -> int:
    lines = records()
    if "--records" in argv:
        print("\n".join(lines))
    else:
        print(hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
