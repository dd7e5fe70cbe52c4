"""The two sides of a gate: what each one is, where its Bazel output base lives, its fingerprint.

A side is one of
  pinned          third_party/python/requirements.lock (the default baseline)
  lock:PATH       another requirements lock (exact pins with --hash), installed into @pypi
                  through TORCH_TEST_LOCK (tools/bazel, tools/python/pypi.bzl)
  python:PATH     a Python interpreter whose own packages are used (host mode, TORCH_TEST_PYTHON)
  results:DIR     a run saved by tools/gate/save_run.py (its build event file, test.xml/test.log
                  and the host's hardware fingerprint): nothing runs, e.g. the same tree on an
                  old and a new GPU pool
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

from tools.gate import hardware, variant_plan
from tools.hardware import envvars
from tools.hardware import probe as hardware_probe
from tools.python import host_mode, lock

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINNED_LOCK = lock.PINNED
# A venv's own installer, never in a lock: not a difference between the sides.
VENV_TOOLS = ("pip", "setuptools", "wheel")
# What a saved run's directory holds (tools/gate/save_run.py).
SAVED_FILES = ("events.json", "side.json")
# Variables that choose @pypi's mode: each side sets its own and inherits none.
MODE_VARS = (envvars.PYTHON, envvars.LOCK)
# TORCH_TEST_PYTHON's explicit choice of a lock, over the checkout's `tools/bazel setup`.
PINNED_PYTHON = host_mode.PINNED

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
    kind: str  # "pinned", "lock", "python", "results"
    path: pathlib.Path
    # What the gate's variant plan asks of this side's host platform (tools/gate/variant_plan).
    plan_env: tuple = ()

    @property
    def description(self) -> str:
        if self.kind == "pinned":
            return f"pinned lock ({self.path.relative_to(ROOT)})"
        if self.kind == "results":
            return f"saved run {self.path}"
        return f"{'lock' if self.kind == 'lock' else 'interpreter'} {self.path}"

    @property
    def key(self) -> str:
        """Names this side's output base: the same side always gets the same one (warm cache)."""
        digest = hashlib.sha256(str(self.path).encode()).hexdigest()[:12]
        return f"{self.kind}-{digest}"

    def env(self, base: dict) -> dict:
        env = {k: v for k, v in base.items() if k not in MODE_VARS}
        if self.kind in ("pinned", "lock"):
            # A lock's torch is taken for a CPU build (tools/platforms/host_hardware.bzl): on a
            # GPU host such a side asks for its CPU variants, as `--config=cpu` does, instead
            # of stopping at the host's GPUs; its GPU variants are SKIPPED, so not compared.
            env[envvars.CPU_ONLY] = "1"
        if self.kind == "lock":
            env[envvars.LOCK] = str(self.path)
        env[envvars.PYTHON] = str(self.path) if self.kind == "python" else PINNED_PYTHON
        env.update(self.plan_env)
        return env


def parse(role: str, spec: str) -> Side:
    if spec == "pinned":
        return Side(role, "pinned", PINNED_LOCK)
    kind, _, rest = spec.partition(":")
    if kind not in ("lock", "python", "results") or not rest:
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
    if side.kind == "results":
        for name in SAVED_FILES:
            if not (side.path / name).is_file():
                raise BadSide(
                    f"{side.role} {side.path} is not a saved run: no {name} (save one with "
                    "`python3 -m tools.gate.save_run EVENTS.json DIR`)"
                )
        return
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
    return hardware.ask(python, _PROBE, 60, env)


@functools.cache  # the host's, the same for both sides
def gpus() -> list[str]:
    out = (
        hardware_probe.nvidia_smi("--query-gpu=name,driver_version", "--format=csv,noheader") or ""
    )
    return [line.strip() for line in out.splitlines() if line.strip()]


# The GPU-host check's own question (tools/platforms/host_hardware.bzl): can this torch use CUDA?
_CAN_USE_GPUS = "from tools.hardware import probe; probe.main()"


def gpu_facts(side: Side) -> variant_plan.SideFacts:
    """What the variant plan needs of a side: its torch, whether it can use the GPUs, how many."""
    if side.kind == "results":
        hw = saved(side)["hardware"]
        cuda = bool(hw.get("torch_cuda"))
        return variant_plan.SideFacts(
            side.role, hw.get("torch"), cuda, hw.get("gpu_count") or 0, saved=True
        )
    if side.kind != "python":  # a lock's torch is taken for a CPU build, as host_hardware does
        return variant_plan.SideFacts(
            side.role, _lock_pins(side.path).get("torch"), False, len(gpus())
        )
    torch = (probe(side.path) or {}).get("torch")
    cuda = False
    if gpus():  # asks torch itself (seconds), as the GPU-host check does
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
        cuda = bool((hardware.ask(side.path, _CAN_USE_GPUS, 300, env) or {}).get("cuda"))
    return variant_plan.SideFacts(side.role, torch, cuda, len(gpus()))


def saved(side: Side) -> dict:
    """side.json of a saved run (tools/gate/save_run.py)."""
    return json.loads((side.path / "side.json").read_text())


def fingerprint(side: Side, output_base: pathlib.Path) -> dict:
    """What the tests of this side ran on: read from the @pypi the run used."""
    if side.kind == "results":
        hw = saved(side)["hardware"]
        return {
            "python": saved(side).get("python_version"),
            "torch": hw.get("torch"),
            "cuda": hw.get("torch_cuda"),
            "gpus": hw.get("gpus", []),
        }
    pypi = output_base / "external" / "pypi"
    if side.kind == "python":
        info = probe(side.path)
    else:
        env = dict(os.environ, PYTHONPATH=str(pypi / "site"), PYTHONNOUSERSITE="1")
        info = probe(pypi / "venv" / "bin" / "python3", env)
    return dict(info or {"python": None, "torch": None, "cuda": None}, gpus=gpus())


def hardware_of(side: Side, output_base: pathlib.Path, here: dict) -> dict:
    """The side's hardware fingerprint (tools/gate/hardware.py) and the tree it ran: saved with
    a saved run, else this host's and `here` (tree.state of the checkout the gate ran); torch's
    CUDA and NCCL are asked of its interpreter where the host has GPUs."""
    if side.kind == "results":
        record = saved(side)
        ran = {key: record.get(key) for key in ("commit", "tree", "dirty")}
        return dict(record["hardware"], host=record.get("host"), **ran)
    if not gpus():
        return dict(hardware.fingerprint(), **here)
    if side.kind == "python":
        return dict(hardware.fingerprint(side.path), **here)
    pypi = output_base / "external" / "pypi"
    env = dict(os.environ, PYTHONPATH=str(pypi / "site"), PYTHONNOUSERSITE="1")
    return dict(hardware.fingerprint(pypi / "venv" / "bin" / "python3", env), **here)


def manifest(output_base: pathlib.Path) -> dict:
    """@pypi//:manifest.json of the run (tools/python/generate_build.py): {"mode", "packages":
    {name: version the tests got}, "missing": [locked names the interpreter lacks]}."""
    path = pathlib.Path(output_base) / "external" / "pypi" / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def missing_packages(output_base: pathlib.Path) -> list[str]:
    """Host mode: the lock's packages the interpreter lacks (their targets are SKIPPED)."""
    return manifest(output_base).get("missing", [])


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
    if side.kind == "results":
        return saved(side)["packages"]
    if side.kind != "python":
        return _lock_pins(side.path)
    try:
        out = subprocess.run(
            [str(side.path), "-c", _LIST_PACKAGES], capture_output=True, text=True, check=True
        ).stdout
        own = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        own = {}
    got = manifest(output_base).get("packages", {}) if output_base else {}
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
