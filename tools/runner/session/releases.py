"""Torch release keys ("2.13"): how test_utils.versions and declared expectations name releases.

Standard library only, so the outcome audit (tools.runner.session.expectations) can name the release
without the targets that declare nothing importing torch; torch is imported when the running
release is asked for.
"""


def torch_release() -> tuple[int, int]:
    """(major, minor) of the torch under test."""
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def parse_release(key: str) -> tuple[int, int]:
    """(2, 13) for the key "2.13"; ValueError for anything else."""
    major, minor = key.split(".")
    return int(major), int(minor)


def release_key(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"
