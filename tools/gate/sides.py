"""The two sides of a gate: what each one is, where its Bazel output base lives, its fingerprint.

A side is one of
  pinned          third_party/python/requirements.lock (the default baseline)
  lock:PATH       another requirements lock (exact pins with --hash), installed into @pypi
                  through TORCH_TEST_LOCK (tools/bazel, tools/python/pypi.bzl)
  python:PATH     a Python interpreter whose own packages are used (host mode, TORCH_TEST_PYTHON)
A bare PATH is an interpreter if it is an executable file, else a lock.

check() rejects a bad side with one line naming it, before anything runs.
"""

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import subprocess

from tools.hardware import envvars
from tools.hardware import probe as hardware_probe
from tools.python import lock

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINNED_LOCK = lock.PINNED
# A venv's own installer, never in a lock: not a difference between the sides.
VENV_TOOLS = ("pip", "setuptools", "wheel")
# Variables that choose @pypi's mode: each side sets its own and inherits none.
MODE_VARS = (envvars.PYTHON, envvars.LOCK)

# Runs with the side's interpreter: where torch is and what it was built for, without importing
# it (a CUDA build takes seconds to import). GPUs come from nvidia-smi, once per gate.
_PROBE = r"""
import importlib.util, json, pathlib, sys
spec = importlib.util.find_spec("torch")
info = {"python": sys.version.split()[0], "torch": None, "cuda": None}
if spec and spec.origin:
    ns = {}
    exec((pathlib.Path(spec.origin).parent / "version.py").read_text(), ns)
    info.update(torch=ns.get("__version__"), cuda=ns.get("cuda"))
print(json.dumps(info))
"""


class BadSide(Exception):
    """A side that cannot be gated; the message is the one line the user sees."""


@dataclasses.dataclass(frozen=True)
class Side:
    role: str  # "baseline" or "candidate"
    kind: str  # "pinned", "lock", "python"
    path: pathlib.Path

    @property
    def description(self) -> str:
        if self.kind == "pinned":
            return f"pinned lock ({self.path.relative_to(ROOT)})"
        return f"{'lock' if self.kind == 'lock' else 'interpreter'} {self.path}"

    @property
    def key(self) -> str:
        """Names this side's output base: the same side always gets the same one (warm cache)."""
        digest = hashlib.sha256(str(self.path).encode()).hexdigest()[:12]
        return f"{self.kind}-{digest}"

    def env(self, base: dict) -> dict:
        env = {k: v for k, v in base.items() if k not in MODE_VARS}
        if self.kind == "lock":
            env[envvars.LOCK] = str(self.path)
        elif self.kind == "python":
            env[envvars.PYTHON] = str(self.path)
        return env


def parse(role: str, spec: str) -> Side:
    if spec == "pinned":
        return Side(role, "pinned", PINNED_LOCK)
    kind, _, rest = spec.partition(":")
    if kind not in ("lock", "python") or not rest:
        kind, rest = None, spec
    path = pathlib.Path(rest).expanduser()
    path = path if path.is_absolute() else pathlib.Path.cwd() / path
    if kind is None:
        kind = "python" if path.is_file() and os.access(path, os.X_OK) else "lock"
    # Interpreters keep their path (a venv's python is a symlink to the base interpreter).
    return Side(role, kind, path if kind == "python" else path.resolve())


def _lock_pins(path: pathlib.Path) -> dict:
    try:
        return lock.versions(path)
    except lock.LockError as error:
        raise BadSide(str(error)) from None


def check(side: Side) -> None:
    """Raises BadSide naming what is wrong; cheap (no Bazel, no package index)."""
    name = f"{side.role} {side.description}"
    if side.kind == "python":
        if not side.path.is_file() or not os.access(side.path, os.X_OK):
            raise BadSide(
                f"{side.role} interpreter {side.path} does not exist or is not executable"
            )
        info = probe(side.path)
        if info is None:
            raise BadSide(f"{side.role} interpreter {side.path} does not run")
        if not info["torch"]:
            raise BadSide(f"{side.role} interpreter {side.path} has no torch")
        return
    if not side.path.is_file():
        raise BadSide(f"{name} does not exist")
    try:
        pins = _lock_pins(side.path)
    except BadSide as error:
        raise BadSide(f"{name} does not resolve: {error}") from None
    if "torch" not in pins:
        raise BadSide(f"{name} has no torch")


def probe(python: pathlib.Path, env: dict | None = None) -> dict | None:
    try:
        out = subprocess.run(
            [str(python), "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@functools.cache  # the host's, the same for both sides
def gpus() -> list[str]:
    out = (
        hardware_probe.nvidia_smi("--query-gpu=name,driver_version", "--format=csv,noheader") or ""
    )
    return [line.strip() for line in out.splitlines() if line.strip()]


def fingerprint(side: Side, output_base: pathlib.Path) -> dict:
    """What the tests of this side ran on: read from the @pypi the run used."""
    pypi = output_base / "external" / "pypi"
    if side.kind == "python":
        info = probe(side.path)
    else:
        env = dict(os.environ, PYTHONPATH=str(pypi / "site"), PYTHONNOUSERSITE="1")
        info = probe(pypi / "venv" / "bin" / "python3", env)
    return dict(info or {"python": None, "torch": None, "cuda": None}, gpus=gpus())


def _manifest(output_base: pathlib.Path) -> dict:
    """@pypi//:manifest.json of the run (tools/python/generate_build.py): {"mode", "packages":
    {name: version the tests got}, "missing": [locked names the interpreter lacks]}."""
    manifest = pathlib.Path(output_base) / "external" / "pypi" / "manifest.json"
    return json.loads(manifest.read_text()) if manifest.is_file() else {}


def missing_packages(output_base: pathlib.Path) -> list[str]:
    """Host mode: the lock's packages the interpreter lacks (their targets are SKIPPED)."""
    return _manifest(output_base).get("missing", [])


_LIST_PACKAGES = r"""
import importlib.metadata, json, re
print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
                  for d in importlib.metadata.distributions()}))
"""


SUPPLIED = "{version} (the lock's, supplied by @pypi: the interpreter has none)"


def packages(side: Side, output_base: pathlib.Path | None = None) -> dict:
    """{normalized name: version the tests ran on} of a side: its lock's pins, or what its
    interpreter has plus what @pypi supplied from the lock where the interpreter lacks it
    (host mode installs locked pure-Python packages; its manifest lists what the tests got).

    The one reader of a side's packages: a lock's pins, or all a venv holds (the manifest of
    @pypi lists only the lock's packages, not what else a candidate venv brings).
    """
    if side.kind != "python":
        return _lock_pins(side.path)
    try:
        out = subprocess.run(
            [str(side.path), "-c", _LIST_PACKAGES], capture_output=True, text=True, check=True
        ).stdout
        own = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        own = {}
    got = _manifest(output_base).get("packages", {}) if output_base else {}
    for name, version in got.items():
        own.setdefault(name, SUPPLIED.format(version=version))
    return own


def package_changes(baseline: dict, candidate: dict) -> list[dict]:
    """Every package whose version differs between the sides, or that one side lacks."""
    return [
        {"package": name, "baseline": baseline.get(name), "candidate": candidate.get(name)}
        for name in sorted(set(baseline) | set(candidate))
        if baseline.get(name) != candidate.get(name) and name not in VENV_TOOLS
    ]
