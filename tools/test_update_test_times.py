"""tools/update_test_times.py records what the runner's record of each shard says.

Peaks ride the record (tools/results/record.py), not a log line: measured on the H100 image,
pytest left its progress line ("....  [100%]") open, so a peak line printed after it was glued
to it and never matched, and no peak was ever recorded.
"""

import pathlib

from tools import update_test_times
from tools.results import bep, record

SOURCE = "tools/test_update_test_times.py"  # a source that exists: its cases are recorded


def _shard(tmp: pathlib.Path, shard: int, peak: int | None, cases: dict) -> bep.Attempt:
    """A shard whose test.xml has pytest's seconds for `cases` {name: (outcome, seconds)} and
    the runner's record (its outcomes, its GPU peak)."""
    xml = tmp / f"shard_{shard}" / "test.xml"
    xml.parent.mkdir()
    module = SOURCE.removesuffix(".py").replace("/", ".")
    reported = "".join(
        f'<testcase classname="{module}" name="{name}" file="{SOURCE}" time="{seconds}"/>'
        for name, (outcome, seconds) in cases.items()
        if outcome != "never_ran"
    )
    xml.write_text(f"<testsuites><testsuite>{reported}</testsuite></testsuites>")
    rec = record.ShardRecord(gpu_peak_mib=peak)
    rec.cases = {f"{SOURCE}::{name}": record.Case(o) for name, (o, _) in cases.items()}
    record.write(xml, rec)
    # A log line in whatever wording: nothing reads it.
    (xml.parent / "test.log").write_text("distributed_tests/t.py .....   [100%]peak 1 MiB\n")
    outputs = {"test.xml": xml, "test.log": xml.parent / "test.log"}
    return bep.Attempt(shard, 1, 1, "PASSED", False, 1.0, outputs)


def test_peak_and_seconds_come_from_each_shards_record(tmp_path):
    attempts = [
        _shard(tmp_path, 1, 10264, {"test_a": ("passed", 1.234)}),
        _shard(tmp_path, 2, 3000, {"test_b": ("passed", 2.0), "test_c": ("never_ran", 0)}),
    ]
    target = bep.Target("//t:t", status="PASSED", attempts=attempts, shard_count=2)
    times, peaks = update_test_times.collect({"//t:t": target})
    assert peaks == {"//t:t": 10264}  # the largest of its shards
    # A case the witness never saw run has no seconds to record.
    assert times == {"//t:t": {f"{SOURCE}::test_a": 1.23, f"{SOURCE}::test_b": 2.0}}


def test_a_target_without_a_peak_records_none(tmp_path):
    target = bep.Target(
        "//t:cpu", status="PASSED", attempts=[_shard(tmp_path, 1, None, {"test_a": ("passed", 1)})]
    )
    assert update_test_times.collect({"//t:cpu": target})[1] == {}
