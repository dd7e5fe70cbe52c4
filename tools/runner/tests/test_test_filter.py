"""--test_filter and the target's own -k both apply (tools/runner/session/test_filter.py),
through the real runner: Bazel's filter used to be one more -k, and pytest keeps only the last
one."""

import xml.etree.ElementTree as ET

from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

SEVEN_TESTS = "\n".join(f"def test_{n}():\n    pass\n" for n in "abcdefg")


def _cases(path) -> list[str]:
    return sorted(case.get("name") for case in ET.parse(path).getroot().iter("testcase"))


def test_filter_and_the_targets_own_k_both_apply(tmp_path):
    # torch_test(args = ["-k", "not test_b"]) with --test_filter: (filter) and (args' -k).
    test_file = write_tests(tmp_path, SEVEN_TESTS)
    env = bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="test_a or test_b or test_c")
    result = run_runner(test_file, env, args=["-k", "not test_b"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert _cases(tmp_path / "test.xml") == ["test_a", "test_c"]


def test_the_k_after_the_filter_on_the_command_line_applies_too(tmp_path):
    # `bazel run ... -- -k X` with --test_filter: X arrives after the target's args.
    test_file = write_tests(tmp_path, SEVEN_TESTS)
    env = bazel_env(tmp_path, TESTBRIDGE_TEST_ONLY="not test_g")
    result = run_runner(test_file, env, args=["-k", "not test_a", "-k", "test_e or test_g"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert _cases(tmp_path / "test.xml") == ["test_e"]
