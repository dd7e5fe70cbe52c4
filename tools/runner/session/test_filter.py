"""Bazel's --test_filter composed with the target's own -k: both apply, `(FILTER) and (K)`.

pytest keeps only the last -k of its command line, so passing the filter as one more -k lost
either it or the target's `args = ["-k", ...]` (and what `bazel run ... -- -k` adds). Loaded as
a plugin instead, it joins whatever -k pytest parsed, wherever that came from; what the runner
excuses joins it with the command line's -k alone (user_filter.py).

PYTEST_DONT_REWRITE: the runner's test process imported this module before pytest loads it.
"""

import os

FILTER_ENV = "TESTBRIDGE_TEST_ONLY"  # Bazel's --test_filter


def runner_args(env=os.environ) -> list[str]:
    """The runner's pytest arguments for the filter: this plugin, when a filter is set."""
    return ["-p", __name__] if env.get(FILTER_ENV) else []


def composed(test_filter: str, keyword: str) -> str:
    """The -k expression that applies both."""
    keyword = keyword.strip()
    return f"({test_filter}) and ({keyword})" if keyword else test_filter


def pytest_configure(config):
    # Before collection: pytest's own -k deselection reads the option then.
    config.option.keyword = composed(os.environ[FILTER_ENV], config.option.keyword or "")
