"""Self-tests of what makes a target green (tools.runner.session.outcome_audit,
tools.runner.session.expectations,
tools/runner/refused_options.py): the real runner on small generated test files. Unit tests of
test_utils' own modules live in test_utils/tests (test_expectations.py).
"""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from tools.results import junit, record
from tools.runner.tests.runner_subprocess import bazel_env, declare, run_runner, write_tests

# One test skipping for want of a GPU, one running.
SKIPS_FOR_GPU = """
    import unittest

    class T(unittest.TestCase):
        def test_gpu(self):
            self.skipTest("requires cuda")

        def test_cpu(self):
            pass
    """
FAILS = "def test_broken():\n    assert 1 == 2, 'off by one'\n\ndef test_ok():\n    pass\n"
PASSES = "def test_a():\n    pass\n\ndef test_b():\n    pass\n\ndef test_c():\n    pass\n"


def cases(tmp_path) -> dict[str, record.Case]:
    return {c.name: c.case for c in junit.cases(tmp_path / "test.xml")}


def run(tmp_path, body: str, env=None, args=()):
    result = run_runner(write_tests(tmp_path, body), env or bazel_env(tmp_path), args=args)
    result.output = result.stdout + result.stderr
    return result


SKIP_ENTRY = """
    test = "test_fixture.py::T::test_gpu"
    outcome = "skip"
    reason = "needs a GPU; the cpu target has none"
    match = "requires cuda"
    """


def test_declared_skip_passes_and_is_in_junit(tmp_path):
    result = run(tmp_path, SKIPS_FOR_GPU, declare(tmp_path, SKIP_ENTRY))
    assert result.returncode == 0, result.output
    found = cases(tmp_path)
    assert found["test_gpu"].outcome == "declared_skip"
    assert found["test_gpu"].declaration == "skip: needs a GPU; the cpu target has none"
    assert found["test_cpu"].declaration is None


def test_declared_skip_for_another_reason_fails(tmp_path):
    entry = SKIP_ENTRY.replace('"requires cuda"', '"requires nccl"')
    result = run(tmp_path, SKIPS_FOR_GPU, declare(tmp_path, entry))
    assert result.returncode == 1
    assert (
        "test_gpu: requires cuda (declared skip: 'requires nccl' does not match)" in result.output
    )


def test_undeclared_skip_still_fails_beside_a_declared_one(tmp_path):
    body = (
        textwrap.dedent(SKIPS_FOR_GPU)
        + "\n    def test_other(self):\n        self.skipTest('flaky')\n"
    )
    result = run(tmp_path, body, declare(tmp_path, SKIP_ENTRY))
    assert result.returncode == 1
    assert "skipped tests fail this target" in result.output
    assert "T::test_other: flaky" in result.output


def test_declared_skip_that_runs_is_stale(tmp_path):
    body = "import unittest\n\nclass T(unittest.TestCase):\n    def test_gpu(self):\n        pass\n"
    result = run(tmp_path, body, declare(tmp_path, SKIP_ENTRY))
    assert result.returncode == 1
    assert "stale expectations fail this target" in result.output
    assert "T::test_gpu: declared skip (needs a GPU; the cpu target has none), but it ran" in (
        result.output
    )


FAIL_ENTRY = """
    test = "test_fixture.py::test_broken"
    outcome = "fail"
    reason = "off by one since torch 2.13"
    match = "AssertionError: off by one"
    """


def test_declared_failure_passes_as_xfail_with_its_reason(tmp_path):
    result = run(tmp_path, FAILS, declare(tmp_path, FAIL_ENTRY))
    assert result.returncode == 0, result.output
    broken = cases(tmp_path)["test_broken"]
    assert (broken.outcome, broken.message) == (
        "declared_fail",
        "declared: off by one since torch 2.13",
    )
    assert broken.declaration == "fail: off by one since torch 2.13"


def test_declared_failure_that_passes_is_stale(tmp_path):
    result = run(tmp_path, FAILS.replace("1 == 2", "1 == 1"), declare(tmp_path, FAIL_ENTRY))
    assert result.returncode == 1
    assert (
        "test_broken: declared fail (off by one since torch 2.13), but it passed" in result.output
    )
    # The record keeps what the body did apart from the verdict: the gate reads it, not the
    # wording above, to call the case fixed against a stale declaration.
    rec = record.read(tmp_path / "test.xml")
    (broken,) = [c for n, c in rec.cases.items() if n.endswith("::test_broken")]
    assert broken.outcome == "failed"
    assert broken.stale == {
        "by": "expectations",
        "entry": 1,
        "test": "test_fixture.py::test_broken",
        "outcome": "fail",
        "torch": None,
    }
    assert rec.expectations == str(tmp_path / "test_fixture.expectations.toml")
    assert all(c.stale is None for n, c in rec.cases.items() if n.endswith("::test_ok"))


def test_declared_failure_failing_otherwise_fails(tmp_path):
    body = FAILS.replace("assert 1 == 2, 'off by one'", "raise KeyError('gone')")
    result = run(tmp_path, body, declare(tmp_path, FAIL_ENTRY))
    assert result.returncode == 1
    assert "declared fail, but its failure does not match 'AssertionError: off by one'" in (
        result.output
    )


def test_entry_matching_no_test_is_stale(tmp_path):
    entry = 'test = "test_fixture.py::test_renamed*"\noutcome = "fail"\nreason = "bug 7"\n'
    entry += 'match = "AssertionError: gone since 2.13"\ncount = 1\n'
    result = run(tmp_path, PASSES, declare(tmp_path, entry))
    assert result.returncode == 1
    expected = "[[expect]] #1 (test = 'test_fixture.py::test_renamed*', outcome = 'fail'): "
    assert expected + "matches no test (variant 'cpu')" in result.output


def test_staleness_is_judged_on_the_whole_collection_in_every_shard(tmp_path):
    body = PASSES.replace("def test_c():\n    pass", "def test_c():\n    assert 0, 'bug 7 here'")
    entry = 'test = "test_fixture.py::test_c"\noutcome = "fail"\nreason = "bug 7"\n'
    entry += 'match = "AssertionError: bug 7 here"\n'
    for index in range(3):  # one test per shard: two shards do not run test_c
        env = declare(tmp_path, entry, TEST_TOTAL_SHARDS=3, TEST_SHARD_INDEX=index)
        assert run(tmp_path, body, env).returncode == 0
    stale = 'test = "test_fixture.py::test_gone"\noutcome = "fail"\nreason = "bug 8"\n'
    stale += 'match = "AssertionError: bug 7 here"\n'
    for index in range(3):
        env = declare(tmp_path, entry, stale, TEST_TOTAL_SHARDS=3, TEST_SHARD_INDEX=index)
        result = run(tmp_path, body, env)
        assert result.returncode == 1, f"shard {index}"
        assert "test_gone" in result.output


def test_pattern_and_parametrized_ids(tmp_path):
    body = """
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_p(n):
            pytest.skip("needs a gpu")

        def test_q_one():
            pytest.skip("needs a gpu")

        def test_q_two():
            pytest.skip("needs a gpu")
        """
    entries = [
        'test = "test_fixture.py::test_p[1]"\noutcome = "skip"\nreason = "r"\n'
        'match = "needs a gpu"\n',
        'test = "test_fixture.py::test_p[2]"\noutcome = "skip"\nreason = "r"\n'
        'match = "needs a gpu"\n',
        'test = "test_fixture.py::test_q_*"\noutcome = "skip"\nreason = "r"\n'
        'match = "needs a gpu"\ncount = 2\n',
    ]
    result = run(tmp_path, body, declare(tmp_path, *entries))
    assert result.returncode == 0, result.output
    assert {c.declaration for c in cases(tmp_path).values()} == {"skip: r"}


def test_entries_for_another_variant_do_not_apply(tmp_path):
    entry = SKIP_ENTRY + 'variants = ["gpu"]\n'
    env = declare(tmp_path, entry, declared_variants=["cpu", "gpu"])
    result = run(tmp_path, SKIPS_FOR_GPU, env)
    assert result.returncode == 1
    assert "skipped tests fail this target" in result.output


@pytest.mark.parametrize(
    "entry, shown",
    [
        ('test = "x"\noutcome = "skip"\n', "[[expect]] #1: reason is required"),
        ('test = "x"\noutcome = "sometimes"\nreason = "r"\n', "outcome 'sometimes' is not one of"),
        (
            'test = "x"\noutcome = "skip"\nreason = "r"\nmatch = "needs a gpu"\n'
            'torch = ["2.13.1"]\n',
            "'2.13.1' is not",
        ),
        (
            'test = "x"\noutcome = "skip"\nreason = "r"\nmatch = "needs a gpu"\n'
            'variants = ["tpu"]\n',
            "['tpu'] are not",
        ),
        ('test = "x"\noutcome = "skip"\nreason = "r"\nmatch = "("\n', "fewer than 8 characters"),
        ('test = "x"\noutcome = "skip"\nreason = "r"\nwhy = "?"\n', "unknown keys ['why']"),
    ],
    ids=["no_reason", "bad_outcome", "bad_release", "bad_variant", "bad_match", "unknown_key"],
)
def test_malformed_expectations_fail_naming_the_entry(tmp_path, entry, shown):
    result = run(tmp_path, PASSES, declare(tmp_path, entry))
    assert result.returncode != 0
    assert shown in result.output


def test_a_test_declared_twice_fails(tmp_path):
    one = 'test = "test_fixture.py::test_a"\noutcome = "skip"\nreason = "r"\n'
    one += 'match = "needs a gpu"\n'
    two = 'test = "test_fixture.py::test_*"\noutcome = "fail"\nreason = "s"\n'
    two += 'match = "AssertionError: off by one"\ncount = 3\n'
    result = run(tmp_path, PASSES, declare(tmp_path, one, two))
    assert result.returncode != 0
    assert "test_fixture.py::test_a is declared twice" in result.output


def refused_in_one_line(tmp_path, result, line: str) -> None:
    """The target failed with `line` (the expectations file's problem and its fix), no
    traceback, and its shard's record holds that line."""
    assert result.returncode != 0
    assert "Traceback" not in result.output and "INTERNALERROR" not in result.output, result.output
    assert [s for s in result.output.splitlines() if line in s], result.output
    rec = record.read(tmp_path / "test.xml")
    assert rec is not None, "no record in test.xml"
    assert rec.verdict == record.FAILED
    assert [p for p in rec.problems if line in p], rec.problems


def test_an_expectations_file_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    env = declare(tmp_path, SKIP_ENTRY)
    path = tmp_path / "test_fixture.expectations.toml"
    path.write_bytes(path.read_bytes().replace(b"the cpu target", b"the cpu \xe9 target"))
    result = run(tmp_path, SKIPS_FOR_GPU, env)
    refused_in_one_line(
        tmp_path, result, f"{path}: byte 0xe9 on line 5 is not UTF-8: write the file as UTF-8 text"
    )


def test_an_entry_written_twice_is_refused_in_one_line(tmp_path):
    result = run(tmp_path, SKIPS_FOR_GPU, declare(tmp_path, SKIP_ENTRY, SKIP_ENTRY))
    refused_in_one_line(
        tmp_path,
        result,
        "test_fixture.expectations.toml: [[expect]] #2 (test = 'test_fixture.py::T::test_gpu', "
        "outcome = 'skip'): test_fixture.py::T::test_gpu is declared twice, here and by "
        "[[expect]] #1 (test = 'test_fixture.py::T::test_gpu', outcome = 'skip'): keep one entry "
        "for it (remove one, or narrow the pattern)",
    )


def test_a_torch_keyed_entry_where_the_target_has_no_torch_is_refused_in_one_line(tmp_path):
    result = run(tmp_path, SKIPS_FOR_GPU, declare(tmp_path, SKIP_ENTRY + 'torch = ["2.13"]\n'))
    refusal = "torch = ['2.13'] applies it to torch releases, and this target has no torch"
    if importlib.util.find_spec("torch") is not None:
        # Host mode (a GPU image's interpreter): its torch reaches every target, this one's
        # too, so the torch key is read against that release and never refused as torch-less.
        assert refusal not in result.output, result.output
        assert record.read(tmp_path / "test.xml") is not None, result.output
        return
    # Pinned mode: this target's deps hold no torch (BUILD.bazel), nor the runner it starts.
    refused_in_one_line(
        tmp_path,
        result,
        "test_fixture.expectations.toml: [[expect]] #1 (test = 'test_fixture.py::T::test_gpu', "
        f"outcome = 'skip'): {refusal}: remove the torch key, or add torch to the target's deps",
    )


# Cases their source expects to fail, passing: unittest's expectedFailure, a strict xfail.
EXPECTED_FAILURES_PASS = """
    import unittest

    import pytest

    class T(unittest.TestCase):
        @unittest.expectedFailure
        def test_fixed(self):
            self.assertEqual(1, 1)

    @pytest.mark.xfail(reason="bug 9", strict=True)
    def test_strict():
        pass

    def test_plain():
        pass
    """
PASS_ENTRIES = [
    'test = "test_fixture.py::T::test_fixed"\noutcome = "pass"\nreason = "fixed in 2.13"\n',
    'test = "test_fixture.py::test_strict"\noutcome = "pass"\nreason = "bug 9 fixed in 2.13"\n',
]


def test_a_declared_pass_of_an_expected_failure_is_green_and_recorded_as_a_pass(tmp_path):
    result = run(tmp_path, EXPECTED_FAILURES_PASS, declare(tmp_path, *PASS_ENTRIES))
    assert result.returncode == 0, result.output
    rec = record.read(tmp_path / "test.xml")
    seen = {case: (c.outcome, c.declared) for case, c in rec.cases.items()}
    assert seen == {
        "test_fixture.py::T::test_fixed": ("passed", "fixed in 2.13"),
        "test_fixture.py::test_strict": ("passed", "bug 9 fixed in 2.13"),
        "test_fixture.py::test_plain": ("passed", None),
    }
    assert {c.name: c.case.outcome for c in junit.cases(tmp_path / "test.xml")} == {
        "test_fixed": "passed",
        "test_strict": "passed",
        "test_plain": "passed",
    }


def test_an_expected_failure_that_passes_undeclared_is_red(tmp_path):
    result = run(tmp_path, EXPECTED_FAILURES_PASS)
    assert result.returncode == 1
    rec = record.read(tmp_path / "test.xml")
    assert rec.cases["test_fixture.py::T::test_fixed"].outcome == "failed"
    assert rec.cases["test_fixture.py::test_strict"].outcome == "failed"


def test_a_declared_pass_of_a_case_that_fails_is_red_saying_so(tmp_path):
    body = textwrap.dedent(EXPECTED_FAILURES_PASS).replace(
        "self.assertEqual(1, 1)", "self.assertEqual(1, 2)"
    )
    result = run(tmp_path, body, declare(tmp_path, *PASS_ENTRIES))
    assert result.returncode == 1
    assert (
        "failed: test_fixture.py::T::test_fixed: AssertionError: 1 != 2 (declared pass (fixed in "
        "2.13): it did not pass)"
    ) in result.output
    assert rec_outcome(tmp_path, "test_fixture.py::T::test_fixed") == "failed"
    assert rec_outcome(tmp_path, "test_fixture.py::test_strict") == "passed"


def test_a_declared_pass_of_a_case_expecting_no_failure_is_refused(tmp_path):
    entry = 'test = "test_fixture.py::test_plain"\noutcome = "pass"\nreason = "r"\n'
    result = run(tmp_path, EXPECTED_FAILURES_PASS, declare(tmp_path, *PASS_ENTRIES, entry))
    refused_in_one_line(
        tmp_path,
        result,
        "test_fixture.expectations.toml: [[expect]] #3 (test = 'test_fixture.py::test_plain', "
        "outcome = 'pass'): test_fixture.py::test_plain expects no failure (no xfail marker, no "
        "unittest.expectedFailure), so there is no unexpected success to declare: remove the "
        "entry",
    )


def rec_outcome(tmp_path, case: str) -> str:
    return record.read(tmp_path / "test.xml").cases[case].outcome


NOT_APPLICABLE = """
    import pytest
    from tools.runner.session.upstream_decorators import not_applicable

    # As torch's onlyMPS reads (upstream_decorators): the plugin skips it at setup.
    @lambda fn: not_applicable(fn, "needs mps")
    def test_mps():
        pass

    def test_cpu():
        pass
    """


def test_not_applicable_skip_is_accepted_and_in_junit(tmp_path):
    result = run(tmp_path, NOT_APPLICABLE)
    assert result.returncode == 0, result.output
    found = cases(tmp_path)
    assert found["test_mps"].outcome == "not_applicable"
    assert found["test_mps"].declaration == "not applicable: needs mps"
    assert found["test_cpu"].declaration is None


@pytest.mark.parametrize(
    "edit",
    [
        (
            "def test_cpu():\n    pass",
            'def test_cpu():\n    pytest.skip("no mps")',
        ),
        (
            '@lambda fn: not_applicable(fn, "needs mps")\ndef test_mps():\n    pass',
            "@pytest.mark.skip(reason='not applicable to this hardware table: mps')\n"
            "def test_mps():\n    pass",
        ),
    ],
    ids=["ordinary_skip_beside_a_marked_test", "prefix_without_marker"],
)
def test_ordinary_skips_are_not_accepted_as_not_applicable(tmp_path, edit):
    body = textwrap.dedent(NOT_APPLICABLE).replace(*edit)
    assert body != textwrap.dedent(NOT_APPLICABLE)
    result = run(tmp_path, body)
    assert result.returncode == 1
    assert "skipped tests fail this target" in result.output


def test_coroutine_test_method_fails_naming_it(tmp_path):
    body = """
        import unittest

        class T(unittest.TestCase):
            async def test_never_awaited(self):
                self.assertEqual(1, 2)

        class A(unittest.IsolatedAsyncioTestCase):
            async def test_awaited(self):
                self.assertEqual(1, 1)
        """
    result = run(tmp_path, body)
    assert result.returncode == 1
    assert "T.test_never_awaited returned a coroutine, so its body never ran" in result.output
    assert cases(tmp_path)["test_awaited"].outcome == "passed"


def test_bare_coroutine_test_fails(tmp_path):
    result = run(tmp_path, "async def test_x():\n    assert 0\n")
    assert result.returncode == 1
    assert "async def functions are not natively supported" in result.output


def test_collection_warning_fails(tmp_path):
    body = """
        class TestHelper:
            def __init__(self):
                pass

            def test_never_collected(self):
                assert 0

        def test_ok():
            pass
        """
    result = run(tmp_path, body)
    assert result.returncode == 1
    assert (
        "defined but never collected by pytest: test_fixture.py::TestHelper::test_never_collected"
    ) in result.output


UNCOLLECTED = """
    import unittest

    class Base(unittest.TestCase):
        __test__ = False

        def test_shared(self):
            assert self.value == 1

    class Real(Base):
        value = 1
    """


def test_test_case_inheriting_test_false_fails(tmp_path):
    result = run(tmp_path, textwrap.dedent(UNCOLLECTED) + "\ndef test_ok():\n    pass\n")
    assert result.returncode == 1
    assert "defined but never collected by pytest: test_fixture.py::Real::test_shared" in (
        result.output
    )


def test_node_ids_on_the_command_line_judge_only_the_classes_they_name(tmp_path):
    # Plain pytest of one test (bench/host_suite.py runs cases alone so): the module's other
    # classes were not asked for. The runner names the whole file, so they still count there.
    body = textwrap.dedent(UNCOLLECTED) + "\nclass Other(unittest.TestCase):\n"
    body += "    def test_one(self):\n        pass\n"
    test_file = write_tests(tmp_path, body)
    plain = {k: v for k, v in bazel_env(tmp_path).items() if not k.startswith(("TEST_", "XML_"))}
    one = f"{test_file.name}::Other::test_one"
    argv = [sys.executable, "-m", "pytest", "-p", "tools.runner.session.plugin", "-p"]
    argv += ["no:cacheprovider", one]
    alone = subprocess.run(argv, env=plain, cwd=tmp_path, capture_output=True, text=True)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "1 passed" in alone.stdout
    named = subprocess.run(
        [*argv[:-1], f"{test_file.name}::Real"], env=plain, cwd=tmp_path, capture_output=True
    )
    assert named.returncode != 0  # asked for by name and never collected
    through_runner = run(tmp_path, body, args=[one])
    assert through_runner.returncode == 1
    assert "defined but never collected by pytest: test_fixture.py::Real::test_shared" in (
        through_runner.output
    )


def test_abstract_test_case_declared_in_its_own_body_passes(tmp_path):
    body = textwrap.dedent(UNCOLLECTED).replace(
        "    value = 1", "    __test__ = True\n    value = 1"
    )
    result = run(tmp_path, body)
    assert result.returncode == 0, result.output
    assert list(cases(tmp_path)) == ["test_shared"]


XFAIL_IN_BODY = """
    import pytest

    def test_later():
        pytest.xfail("not implemented")
        assert 0

    def test_ok():
        pass
    """


def test_xfail_called_in_the_body_is_a_skip(tmp_path):
    result = run(tmp_path, XFAIL_IN_BODY)
    assert result.returncode == 1
    assert "test_later: pytest.xfail() in the test body: not implemented" in result.output


def test_xfail_called_in_the_body_may_be_declared_a_skip(tmp_path):
    entry = 'test = "test_fixture.py::test_later"\noutcome = "skip"\nreason = "r"\n'
    result = run(tmp_path, XFAIL_IN_BODY, declare(tmp_path, entry + 'match = "implemented"\n'))
    assert result.returncode == 0, result.output


@pytest.mark.parametrize(
    "option",
    [
        "--setup-only",
        "--setup-plan",
        "--collect-only",
        "--co",
        "--fixtures",
        "--fixtures-per-test",
        "--markers",
        "--help",
        "--version",
    ],
)
def test_options_that_keep_tests_from_running_are_refused(tmp_path, option):
    test_file = write_tests(tmp_path, PASSES)
    result = run_runner(test_file, bazel_env(tmp_path), args=[option])
    assert result.returncode == 2
    assert f"torch_test: refusing pytest option(s) {option}" in result.stderr


@pytest.mark.parametrize(
    "args", [["-p", "no:tools.runner.session.plugin"], ["-pno:torch_test_outcome_audit"]]
)
def test_turning_the_audit_off_is_refused(tmp_path, args):
    result = run_runner(write_tests(tmp_path, SKIPS_FOR_GPU), bazel_env(tmp_path), args=args)
    assert result.returncode == 2
    # Named as written: refused_options reads the option with its value, in either spelling.
    assert f"torch_test: refusing pytest option(s) {' '.join(args)}" in result.stderr


def test_refused_options_in_pytest_addopts(tmp_path):
    env = bazel_env(tmp_path, PYTEST_ADDOPTS="-q --setup-only")
    result = run_runner(write_tests(tmp_path, PASSES), env)
    assert result.returncode == 2
    assert "refusing pytest option(s) --setup-only" in result.stderr


def test_filter_and_exitfirst_still_work(tmp_path):
    env = {k: v for k, v in bazel_env(tmp_path).items() if k != "TEST_TARGET"}
    env["BUILD_WORKSPACE_DIRECTORY"] = str(tmp_path)  # as `bazel run` sets it
    result = run_runner(write_tests(tmp_path, PASSES), env, args=["-k", "test_b", "-x"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 2 deselected" in result.stdout
