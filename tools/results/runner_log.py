"""What the runner (tools/runner/pytest_runner.py) writes into a test.log, read back.

torch_test resources: wall_s=.. cpu_s=.. peak_rss_mib=.. children_peak_rss_mib=..
"""

import re

RESOURCES = re.compile(r"torch_test resources: (.*)$", re.M)


def _resource_lines(text: str) -> list[dict[str, str]]:
    return [
        dict(f.split("=", 1) for f in line.split() if "=" in f) for line in RESOURCES.findall(text)
    ]


def wall_s(text: str) -> float | None:
    """The runner's wall seconds (the last resource line: one per runner process)."""
    lines = _resource_lines(text)
    return float(lines[-1]["wall_s"]) if lines and "wall_s" in lines[-1] else None


def peak_rss_mib(text: str) -> int | None:
    """The largest peak RSS (the runner's or its children's) of a log's resource lines."""
    peaks = []
    for fields in _resource_lines(text):
        values = [float(v) for k, v in fields.items() if k.endswith("peak_rss_mib")]
        if values:
            peaks.append(max(values))
    return round(max(peaks)) if peaks else None
