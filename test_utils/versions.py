"""Expectations that differ between torch releases, chosen by the torch under test.

    expected = by_torch_version({"2.11": "L['x'] is L['y']", "2.13": "x is y"})

The entry for the newest release not newer than the running torch is used; a torch older than
every entry is an error (the test has no expectation for it), never a silent pass.
"""

import torch

from tools.runner.session.releases import parse_release, torch_release


def by_torch_version(expectations: dict):
    running = torch_release()
    known = sorted((parse_release(k), v) for k, v in expectations.items())
    chosen = [v for release, v in known if release <= running]
    if not chosen:
        raise AssertionError(
            f"no expectation for torch {torch.__version__}; known releases: {sorted(expectations)}"
        )
    return chosen[-1]
