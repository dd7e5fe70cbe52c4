"""Self-tests of the Bazel test protocol in tools/runner/pytest_runner.py.

Each test runs the real runner in a subprocess on a small generated test file, with the
environment Bazel would give it.
"""

import json
import signal
import time
import xml.etree.ElementTree as ET

import pytest

from tools.results import record
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, start_runner, write_tests

SEVEN_TESTS = "\n".join(f"def test_{n}():\n    pass\n" for n in "abcdefg")
THREE_TESTS = "\n".join(f"def test_{n}():\n    pass\n" for n in "abc")


def xml_cases(path) -> list[str]:
    return [case.get("name") for case in ET.parse(path).getroot().iter("testcase")]


def test_shards_partition_the_tests(tmp_path):
    test_file = write_tests(tmp_path, SEVEN_TESTS)
    seen = []
    for index in range(3):
        status = tmp_path / f"status{index}"
        env = bazel_env(
            tmp_path, TEST_TOTAL_SHARDS=3, TEST_SHARD_INDEX=index, TEST_SHARD_STATUS_FILE=status
        )
        result = run_runner(test_file, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert status.exists(), "runner must touch TEST_SHARD_STATUS_FILE"
        cases = xml_cases(tmp_path / "test.xml")
        assert cases, f"shard {index} ran nothing"
        seen.extend(cases)
    assert sorted(seen) == [f"test_{n}" for n in "abcdefg"]  # union = all, no test twice


def test_xml_lists_each_case_under_the_target_name(tmp_path):
    test_file = write_tests(tmp_path, "def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 1
    suite = ET.parse(tmp_path / "test.xml").getroot().find("testsuite")
    assert suite.get("name") == "//fake:target"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["test_bad"]
    assert sorted(xml_cases(tmp_path / "test.xml")) == ["test_bad", "test_ok"]


def test_packed_sources_report_every_file_and_fail_on_any(tmp_path):
    # torch_test(srcs = [...]): one process runs several files; a failure in any fails it.
    first = write_tests(tmp_path, "def test_first():\n    pass\n", name="test_one.py")
    second = write_tests(tmp_path, "def test_second():\n    assert 0\n", name="test_two.py")
    result = run_runner(first, bazel_env(tmp_path), args=[str(second)])
    assert result.returncode == 1, result.stdout + result.stderr
    assert sorted(xml_cases(tmp_path / "test.xml")) == ["test_first", "test_second"]


def test_empty_shard_of_non_empty_target_passes(tmp_path):
    test_file = write_tests(tmp_path, "def test_only():\n    pass\n")
    codes = []
    for index in range(3):
        env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=3, TEST_SHARD_INDEX=index)
        codes.append(run_runner(test_file, env).returncode)
    assert codes == [0, 0, 0]


def test_filter_selects_and_empty_filter_fails(tmp_path):
    test_file = write_tests(tmp_path, SEVEN_TESTS)
    result = run_runner(test_file, bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="test_c or test_e"))
    assert result.returncode == 0, result.stderr
    assert sorted(xml_cases(tmp_path / "test.xml")) == ["test_c", "test_e"]

    result = run_runner(test_file, bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="no_such_test"))
    assert result.returncode == 1
    assert "no tests selected in this target" in result.stderr
    assert "no_such_test" in result.stderr


def test_file_without_tests_fails(tmp_path):
    test_file = write_tests(tmp_path, "X = 1\n")
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 1
    assert "no tests selected in this target" in result.stderr


@pytest.mark.parametrize(
    "body",
    [
        "import pytest\n\n@pytest.mark.skip(reason='no gpu')\ndef test_a():\n    pass\n",
        "import unittest\n\nclass T(unittest.TestCase):\n"
        "    def test_a(self):\n        self.skipTest('no gpu')\n"
        "    def test_b(self):\n        pass\n",
    ],
    ids=["all_skipped", "one_of_two_skipped"],
)
def test_skipped_tests_fail_the_target(tmp_path, body):
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 1
    assert "skipped tests fail this target" in result.stdout
    assert "no gpu" in result.stdout


def test_expected_failure_is_not_a_skip(tmp_path):
    body = "import unittest\n\nclass T(unittest.TestCase):\n"
    body += "    @unittest.expectedFailure\n    def test_a(self):\n        assert 0\n"
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    "body, shown",
    [
        (
            "import pytest\n\n@pytest.mark.xfail(run=False, reason='hangs')\ndef test_a():\n"
            "    pass\n\ndef test_b():\n    pass\n",
            "skipped tests fail this target",
        ),
        (
            "import pytest\n\n@pytest.mark.xfail(reason='bug 1')\ndef test_a():\n    pass\n",
            "[XPASS(strict)] bug 1",
        ),
        (
            "import pytest\n\n@pytest.mark.xfail(reason='bug 1', strict=False)\n"
            "def test_a():\n    pass\n",
            "unexpected passes (XPASS) fail this target",
        ),
    ],
    ids=["xfail_not_run", "xpass", "xpass_not_strict"],
)
def test_xfail_that_did_not_fail_fails_the_target(tmp_path, body, shown):
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 1
    assert shown in result.stdout
    if "XPASS(strict)" in shown:  # JUnit (tools/results) reads it as a failure too
        assert "<failure" in (tmp_path / "test.xml").read_text()


def test_xfail_that_ran_and_failed_passes(tmp_path):
    body = "import pytest\n\n@pytest.mark.xfail(reason='bug 1', raises=AssertionError)\n"
    body += "def test_a():\n    assert 0\n"
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 0, result.stdout


def test_module_level_importorskip_names_the_module(tmp_path):
    body = "import pytest\n\npytest.importorskip('no_such_module_xyz')\n\n"
    body += "def test_a():\n    pass\n"
    result = run_runner(write_tests(tmp_path, body), bazel_env(tmp_path))
    assert result.returncode == 1
    assert "no_such_module_xyz" in result.stdout + result.stderr


def test_missing_gpus_fail_loudly(tmp_path):
    body = "from test_utils.hardware import requires_gpus\n\n@requires_gpus(2)\n"
    body += "def test_two_gpus():\n    pass\n"
    env = bazel_env(tmp_path, dict(variant="multi_gpu"), CUDA_VISIBLE_DEVICES="")
    result = run_runner(write_tests(tmp_path, body), env)
    assert result.returncode != 0
    assert "needs 2 GPUs, found 0" in result.stderr


def test_missing_gpus_are_an_infrastructure_failure(tmp_path):
    infra = tmp_path / "test.infrastructure_failure"
    env = bazel_env(tmp_path, dict(variant="gpu"), CUDA_VISIBLE_DEVICES="")
    env["TEST_INFRASTRUCTURE_FAILURE_FILE"] = str(infra)
    result = run_runner(write_tests(tmp_path, "def test_a():\n    pass\n"), env)
    assert result.returncode != 0
    assert "needs 1 GPU" in infra.read_text()
    # And the shard's record, which the gate reads (no test ran: the host's failure).
    rec = record.read(tmp_path / "test.xml")
    assert "needs 1 GPU, found 0" in rec.infrastructure
    assert (rec.verdict, rec.cases) == (record.FAILED, {})


def test_test_in_undeclared_variant_fails(tmp_path):
    body = "from test_utils.hardware import requires_gpus\n\ndef test_cpu():\n    pass\n\n"
    body += "@requires_gpus(1)\ndef test_one_gpu():\n    pass\n"
    env = bazel_env(tmp_path, dict(variant="cpu", declared_variants=["cpu"]))
    result = run_runner(write_tests(tmp_path, body), env)
    assert result.returncode != 0
    assert "test_one_gpu (gpu)" in result.stdout + result.stderr


def test_a_target_of_5000_recorded_cases_starts_and_packs_by_them(tmp_path):
    # tools/update_test_times.py records every case of a packed upstream target: 5,000 of them
    # in the spec's one environment string made it ~500 KB, over Linux's 128 KiB for one
    # string (MAX_ARG_STRLEN), and the runner never started (E2BIG).
    test_file = write_tests(tmp_path, THREE_TESTS)
    durations = {f"{test_file.name}::test_{i:04d}_{'x' * 60}": 0.5 for i in range(4997)}
    durations.update({f"{test_file.name}::test_a": 100.0, f"{test_file.name}::test_b": 1.0})
    durations[f"{test_file.name}::test_c"] = 1.0
    env = bazel_env(tmp_path, dict(durations=durations), TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=0)
    result = run_runner(test_file, env)
    assert result.returncode == 0, result.stdout + result.stderr
    # Longest first: test_a's 100 s fill shard 0 (round-robin would deal it test_a and test_c).
    assert xml_cases(tmp_path / "test.xml") == ["test_a"]


def test_premature_exit_file_is_removed_on_clean_exit(tmp_path):
    marker = tmp_path / "premature"
    env = bazel_env(tmp_path, TEST_PREMATURE_EXIT_FILE=marker)
    result = run_runner(write_tests(tmp_path, "def test_ok():\n    pass\n"), env)
    assert result.returncode == 0
    assert not marker.exists()


def test_sigterm_dumps_stacks_and_exits(tmp_path):
    ready = tmp_path / "ready"
    body = f"""
        import pathlib, time

        def test_sleeps_forever():
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(600)
        """
    test_file = write_tests(tmp_path, body)
    proc = start_runner(test_file, bazel_env(tmp_path))
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "fixture test never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "SIGTERM" in stderr
    assert "test_sleeps_forever" in stderr  # the stack dump shows where the test hung
    # The gate names the hung case by this line (tools/results/runner_log.py).
    assert "while running test_fixture.py::test_sleeps_forever (call)" in stderr


def test_node_ids_select_exact_cases_with_any_characters(tmp_path):
    # A -k expression cannot name these ids (spaces, brackets, `or`): the node-id list can.
    body = (
        "import pytest\n\n"
        "@pytest.mark.parametrize('mode', ['relu inplace', 'a or b', 'plain'])\n"
        "def test_p(mode):\n    pass\n"
    )
    test_file = write_tests(tmp_path, body)
    ids = [f"{test_file.name}::test_p[relu inplace]", f"{test_file.name}::test_p[a or b]"]
    env = bazel_env(tmp_path, TORCH_TEST_NODE_IDS=json.dumps(ids))
    result = run_runner(test_file, env)
    assert result.returncode == 0, result.stderr
    assert sorted(xml_cases(tmp_path / "test.xml")) == ["test_p[a or b]", "test_p[relu inplace]"]

    # An id that matches nothing runs nothing, and the target fails (a re-run proves nothing).
    env = bazel_env(tmp_path, TORCH_TEST_NODE_IDS=json.dumps([f"{test_file.name}::test_p[x]"]))
    result = run_runner(test_file, env)
    assert result.returncode == 1
    assert "no tests selected in this target" in result.stderr


def test_a_runner_that_raises_still_writes_its_record(tmp_path, monkeypatch):
    from tools.results import record
    from tools.runner import pytest_runner

    def broken(argv, env):
        raise RuntimeError("the verdict broke\nsecond line")

    monkeypatch.setattr(pytest_runner, "_run", broken)
    env = {"XML_OUTPUT_FILE": str(tmp_path / "test.xml"), "TEST_TARGET": "//fake:target"}
    with pytest.raises(RuntimeError, match="the verdict broke"):
        pytest_runner.run(["test_x.py"], env)
    rec = record.read(tmp_path / "test.xml")
    assert (rec.verdict, rec.problems) == (
        record.FAILED,
        ["the runner failed: RuntimeError: the verdict broke"],
    )
