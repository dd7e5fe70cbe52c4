"""Self-tests of the CI case counter (tools/ci/summarize_testlogs.py)."""

import os

from tools.ci import summarize_testlogs

LABEL = "//pkg:t"


def _write_xml(path, passed: int, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cases = "".join(f'<testcase name="c{i}"/>' for i in range(passed))
    path.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    os.utime(path, (mtime, mtime))


def _passed(testlogs) -> int:
    files = summarize_testlogs.xml_files(testlogs, LABEL)
    return summarize_testlogs.count_cases(files)["passed"]


def test_counts_every_shard_once_and_ignores_runs_per_test_leftovers(tmp_path):
    base = tmp_path / "pkg" / "t"
    _write_xml(base / "shard_1_of_2" / "test.xml", 1, 2000)
    _write_xml(base / "shard_2_of_2" / "test.xml", 3, 2000)
    for run in (1, 2, 3):
        _write_xml(base / f"shard_1_of_2_run_{run}_of_3" / "test.xml", 1, 1000)
        _write_xml(base / f"shard_2_of_2_run_{run}_of_3" / "test.xml", 2, 1000)
    assert _passed(tmp_path) == 4


def test_newest_layout_wins_after_shard_count_changes(tmp_path):
    base = tmp_path / "pkg" / "t"
    _write_xml(base / "shard_1_of_2" / "test.xml", 5, 1000)
    _write_xml(base / "shard_2_of_2" / "test.xml", 5, 1000)
    _write_xml(base / "test.xml", 7, 2000)  # now unsharded
    assert _passed(tmp_path) == 7
    _write_xml(base / "shard_1_of_3" / "test.xml", 1, 3000)
    _write_xml(base / "shard_2_of_3" / "test.xml", 1, 3000)
    _write_xml(base / "shard_3_of_3" / "test.xml", 1, 3000)
    assert _passed(tmp_path) == 3


def test_a_target_without_logs_counts_nothing(tmp_path):
    assert summarize_testlogs.xml_files(tmp_path, LABEL) == []
