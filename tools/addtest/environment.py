"""The tests' environment add_test collects in: @pypi's interpreter, site folder and manifest,
read where tools/bazel fetched it (or fetched now), or this interpreter's inside a target."""

import dataclasses
import hashlib
import json
import os
import pathlib
import pwd
import subprocess
import sys

from tools.python import host_mode

ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Environment:
    """The tests' interpreter, the site folder @pypi adds to their path, and @pypi's manifest."""

    python: str
    site: pathlib.Path | None
    manifest: dict
    described: str

    @classmethod
    def of_this_interpreter(cls) -> "Environment":
        """The interpreter running now, inside a Bazel target that has @pypi's torch and
        manifest.json (a data dep) in its runfiles: add_test's own self-tests."""
        # The runfiles' @pypi (torch itself may be the host interpreter's, in host mode).
        runfiles = pathlib.Path(os.environ.get("RUNFILES_DIR") or os.environ["TEST_SRCDIR"])
        manifest = json.loads((runfiles / "pypi" / "manifest.json").read_text())
        return cls(sys.executable, None, manifest, "this target's interpreter")


def _environment_at(repo: pathlib.Path) -> Environment:
    manifest = json.loads((repo / "manifest.json").read_text())
    mode = f"host interpreter {host_mode.host_python()}"  # TORCH_TEST_PYTHON, or the setup's
    described = mode if manifest.get("mode") == "host" else "@pypi's pinned lock"
    return Environment(str(repo / "venv" / "bin" / "python3"), repo / "site", manifest, described)


def _asks_for_host_mode() -> bool:
    """Whether tools/bazel would use a host interpreter (tools/python/host_mode.py)."""
    return host_mode.host_python() is not None


def fetched_pypi() -> Environment | None:
    """@pypi as tools/bazel last fetched it, read where Bazel keeps it by default, without
    starting Bazel (a command would queue behind any build running in this checkout); None when
    it is not there, is of the other mode, is older than the lock, or another lock is asked for."""
    if os.environ.get("TORCH_TEST_LOCK"):
        return None
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    user = os.environ.get("USER") or pwd.getpwuid(os.getuid()).pw_name  # as Bazel names it
    workspace = hashlib.md5(str(ROOT).encode()).hexdigest()
    repo = cache / "bazel" / f"_bazel_{user}" / workspace / "external" / "pypi"
    manifest = repo / "manifest.json"
    lock = ROOT / "third_party" / "python" / "requirements.lock"
    if not manifest.is_file() or manifest.stat().st_mtime < lock.stat().st_mtime:
        return None
    env = _environment_at(repo)
    if (env.manifest.get("mode") == "host") != _asks_for_host_mode():
        return None
    return env


def pypi_environment() -> Environment:
    """@pypi's environment, fetched by tools/bazel in the mode its environment asks for."""
    bazel = [str(ROOT / "tools" / "bazel")]
    fetch = subprocess.run(
        [*bazel, "build", "@pypi//:manifest.json"], cwd=ROOT, capture_output=True, text=True
    )
    if fetch.returncode:
        raise SystemExit(f"tools/bazel could not fetch @pypi:\n{fetch.stderr[-3000:]}")
    base = subprocess.run(
        [*bazel, "info", "output_base"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    return _environment_at(pathlib.Path(base, "external", "pypi"))


def tests_environment() -> Environment:
    """@pypi's environment: as fetched already (no Bazel command), else fetched now."""
    return fetched_pypi() or pypi_environment()
