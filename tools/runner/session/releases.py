"""Torch release keys ("2.13"): how test_utils.versions and declared expectations name releases.

Standard library only, so the outcome audit (tools.runner.session.expectations) and the runner's
verdict (tools/runner/verdict.py) can name the release without importing torch: the installed
distribution's metadata says it (torch itself is imported only where it has none).
"""

import importlib.metadata
import sys


def torch_release() -> tuple[int, int]:
    """(major, minor) of the torch under test: the imported torch's, where it is imported."""
    torch = sys.modules.get("torch")
    try:
        version = torch.__version__ if torch else importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        import torch

        version = torch.__version__
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def parse_release(key: str) -> tuple[int, int]:
    """(2, 13) for the key "2.13"; ValueError for anything else."""
    major, minor = key.split(".")
    return int(major), int(minor)


def release_key(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"
