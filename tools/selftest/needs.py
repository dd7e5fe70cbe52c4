"""What a self-test needs of the host, and whether this host has it.

Each need is a name (as the registry's checks list them), a line saying what it is, and a probe
that answers with None (the host has it) or the reason it does not. Probes are cheap: a file
test, nvidia-smi's listing (tools/hardware/probe.py), one request to the package index.
"""

import functools
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What tools/bazel runs; it installs it (root, apt-get) where missing.
BAZEL_BINARY = pathlib.Path("/usr/bin/bazel-4")


def _bazel() -> str | None:
    if BAZEL_BINARY.exists():
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        return None  # tools/bazel installs Debian's Bazel on first use
    return f"no {BAZEL_BINARY}, and tools/bazel cannot install it here (needs root and apt-get)"


def _gpu() -> str | None:
    from tools.hardware import probe

    return None if probe.host_gpu_count() > 0 else "no GPU (nvidia-smi lists none)"


def _index_url() -> str:
    """The package index pip uses (PIP_INDEX_URL, pip's configuration, else PyPI)."""
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        configured = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
            capture_output=True,
            text=True,
        )
        url = configured.stdout.strip() if configured.returncode == 0 else ""
    return url or "https://pypi.org/simple/"


def _network() -> str | None:
    url = _index_url()
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=15):
            return None
    except Exception as error:  # any failure means the same: no index
        return f"the package index {url} does not answer ({error})"


def _venv() -> str | None:
    found = subprocess.run(
        ["python3", "-c", "import ensurepip, venv"], capture_output=True, text=True
    )
    if found.returncode == 0:
        return None
    return "python3 -m venv cannot make a venv with pip (Debian: apt-get install python3-venv)"


def _rig() -> str | None:
    # BuildGrid's Python, found as tools/remote/rig.sh finds it (tools/remote/rig_lib.sh).
    found = subprocess.run(
        ["bash", "-c", "source tools/remote/rig_lib.sh && find_python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        return found.stderr.strip().removeprefix("rig: ") or "no Python for BuildGrid"
    if os.geteuid() != 0:
        return "the rig runs its workers and PostgreSQL's user switch as root"
    return None


def _host_mode() -> str | None:
    from tools.python import host_mode

    python = host_mode.host_python()
    if python is None:
        return "pinned mode: no host interpreter (tools/bazel setup --host-python=PATH)"
    found = subprocess.run([python, "-c", "import torch, pytest"], capture_output=True)
    return None if found.returncode == 0 else f"{python} cannot import torch and pytest"


def _chromium() -> str | None:
    if shutil.which("chromium"):
        return None
    return "no chromium on PATH; Debian: apt-get install -y chromium, as .ci/run does"


NEEDS = {
    "bazel": ("Bazel 4.2.3 through tools/bazel", _bazel),
    "network": ("the package index (pip downloads, a venv, a lock)", _network),
    "venv": ("python3 -m venv with pip (throw-away interpreters)", _venv),
    "gpu": ("an NVIDIA GPU", _gpu),
    "host-mode": ("this checkout on a host interpreter with torch (GPU images)", _host_mode),
    "rig": ("the loopback REAPI rig: Python >= 3.13 for BuildGrid, root", _rig),
    "chromium": ("a headless browser (Debian's chromium)", _chromium),
}


@functools.cache
def missing(need: str) -> str | None:
    """None if this host has NEED, else why not."""
    return NEEDS[need][1]()
