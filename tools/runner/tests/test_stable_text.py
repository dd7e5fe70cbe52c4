"""The folding of what differs between runs (tools/runner/session/stable_text.py), fold by
fold, and declarations that hold across runs because both sides are folded."""

import os
import unittest

import pytest

from tools.runner.session import expectations, stable_text

CHECKOUT = "/home/dev/torch_tests/"
RUNFILES = "/dev/shm/sandbox/7/execroot/torch_tests/bazel-out/bin/x/test_x.runfiles/torch_tests/"


@pytest.fixture
def two_roots(monkeypatch):
    """This process as if its module lay in a checkout and a runfiles tree linking to it."""
    monkeypatch.setattr(stable_text, "_ROOTS", [RUNFILES, CHECKOUT])


def test_a_path_under_the_workspace_reads_from_its_root(two_roots):
    for root in (CHECKOUT, RUNFILES):
        text = f'File "{root}dynamo_tests/test_x.py", line 12, in test_a'
        assert stable_text.fold(text) == 'File "dynamo_tests/test_x.py", line 12, in test_a'
    # Under no root it knows: left as it is (add_test's proposal stops there).
    assert stable_text.fold("cannot open /tmp/pytest-3/x.bin") == "cannot open /tmp/pytest-3/x.bin"
    # The root itself, not a file under it, and a sibling directory that starts alike.
    assert stable_text.fold(f"cwd {CHECKOUT[:-1]}") == f"cwd {CHECKOUT[:-1]}"
    assert stable_text.fold("/home/dev/torch_tests2/a.py") == "/home/dev/torch_tests2/a.py"


def test_a_test_ids_packages_are_where_its_file_lay():
    # torch's common_utils skips the rest of a class after a failure, naming the case by its
    # unittest id: the module as imported, with the packages of wherever the file lay.
    target = (
        "Previous test failed, skipping upstream.tensor.test_init.DTensorConstructorTest.test_full"
    )
    beside = "Previous test failed, skipping test_init.DTensorConstructorTest.test_full"
    assert stable_text.fold(target) == stable_text.fold(beside) == beside
    # What names no test module keeps its dots: a dotted attribute, a version, a file name.
    for kept in ("torch._dynamo.exc.Unsupported: x", "torch 2.13.0", "tests.test.py", "a.test_x"):
        assert stable_text.fold(kept) == kept


def test_the_workspace_roots_are_where_the_module_lies_as_imported_and_resolved():
    here = os.path.abspath(stable_text.__file__)
    for path in (here, os.path.realpath(here)):
        (root,) = [r for r in stable_text._ROOTS if path.startswith(r)]
        assert path[len(root) :] == "tools/runner/session/stable_text.py"


def test_a_path_through_a_site_directory_reads_from_its_package():
    for site in (
        "/usr/lib/python3/dist-packages/",
        "/opt/venv/lib/python3.11/site-packages/",
        "/root/.cache/bazel/_bazel_root/835165e6/external/pypi/site/",
        "/dev/shm/sandbox/7/execroot/torch_tests/bazel-out/bin/x/test_x.runfiles/pypi/site/",
    ):
        text = f"skipped function helper in file '{site}torch/_dynamo/polyfills/__init__.py'"
        assert stable_text.fold(text) == (
            "skipped function helper in file 'torch/_dynamo/polyfills/__init__.py'"
        ), site


def test_unittests_count_of_hidden_characters_reads_N():
    assert stable_text.fold("Lists differ: ['Seq[353 chars]view', '9|aten.sub[626 chars]or|']") == (
        "Lists differ: ['Seq[N chars]view', '9|aten.sub[N chars]or|']"
    )
    assert stable_text.fold("expected [3 items], got [4]") == "expected [3 items], got [4]"


def test_an_address_reads_0x_question_mark():
    text = "<Foo object at 0x7f3a5c2e1d90> is not <Foo object at 0x2a3b4c0>"
    assert stable_text.fold(text) == "<Foo object at 0x?> is not <Foo object at 0x?>"
    # A short hex constant is a value, not an address.
    assert stable_text.fold("flags 0x10 != 0xff") == "flags 0x10 != 0xff"


def test_a_pid_reads_N():
    assert stable_text.fold("Expected exit code 0 but got -11 for pid: 48213") == (
        "Expected exit code 0 but got -11 for pid: N"
    )
    assert stable_text.fold("worker (PID 903) died; pid=904") == "worker (PID N) died; pid=N"
    assert stable_text.fold("rapid 3 steps, pid_count 2") == "rapid 3 steps, pid_count 2"


def test_the_ranks_of_torchs_multi_process_messages_read_R():
    folded = {
        # torch.testing._internal.common_distributed, MultiProcessTestCase._check_return_codes
        "Process 3 exited with error code 10 and exception:": (
            "Process R exited with error code 10 and exception:"
        ),
        # Its timeout's seconds are the parent's wait when it looked again, another in every
        # run: add_test proposed "... after 300.04869771003723 seconds" (DTensor, 2026-12-03).
        "Process 1 terminated or timed out after 300.2 seconds": (
            "Process R terminated or timed out after S seconds"
        ),
        # ... MultiThreadedTestCase._check_return_codes
        "Thread 2 exited with exception:": "Thread R exited with exception:",
        "Thread 0 terminated or timed out after 60 seconds": (
            "Thread R terminated or timed out after S seconds"
        ),
        # torch.distributed's prefixes (distributed_c10d's excepthook, FSDP, c10d's watchdog)
        "[rank1]: Traceback (most recent call last):": (
            "[rankR]: Traceback (most recent call last):"
        ),
        "[Rank 0] Only some but not all ranks have a `None` `FlatParameter` gradient": (
            "[Rank R] Only some but not all ranks have a `None` `FlatParameter` gradient"
        ),
        "[PG ID 0 PG GUID 0(default_pg) Rank 2] Watchdog caught collective operation timeout": (
            "[PG ID 0 PG GUID 0(default_pg) Rank R] Watchdog caught collective operation timeout"
        ),
    }
    for text, expected in folded.items():
        assert stable_text.fold(text) == expected, text
    # A rank that says what went wrong (a tensor's, a group's) and other numbers are kept.
    for kept in (
        "Expected a tensor of rank 2, got rank 3",
        "Global rank 3 is not part of group",
        "Process 3 started with 2 threads",
    ):
        assert stable_text.fold(kept) == kept


def test_folding_folded_text_changes_nothing(two_roots):
    text = (
        f'Process 2 exited with error code 10 and exception:\n  File "{CHECKOUT}t.py", line 3\n'
        "['Seq[353 chars]or|'] at 0x7f3a5c2e1d90 for pid: 48213 [rank1]: x"
    )
    once = stable_text.fold(text)
    assert once != text and stable_text.fold(once) == once


# Declarations: the match and the failure are folded alike, so an entry written from one run
# holds in another.


def _lists_differ(root: str) -> str:
    """The failure_text of a real unittest diff whose hidden part holds a path under `root`."""
    path = f"{root}dynamo_tests/test_x.py:12"
    try:
        unittest.TestCase().assertEqual(
            [f"SeqNr|{path}|aten.mul.Tensor|linear", "9|aten.sub.Tensor|sub"],
            [f"SeqNr|{path}|aten.mm.default|linear", "9|aten.sub.Tensor|sub"],
        )
    except AssertionError as error:
        return expectations.failure_text(error)
    raise AssertionError("the lists are equal")


def _fail(match: str) -> expectations.Entry:
    return expectations.Entry(1, "test_x.py::T::test_a", "fail", "r", match)


def test_a_diff_declared_from_one_directory_matches_the_same_diff_from_another():
    measured, in_target = _lists_differ("/work/main/"), _lists_differ(RUNFILES)
    assert measured.split("[")[2] != in_target.split("[")[2]  # the hidden counts differ
    entry = _fail(measured.splitlines()[0])  # the first line, as the log shows it
    assert entry.matched(in_target) == stable_text.fold(measured.splitlines()[0])
    assert entry.mismatch(in_target) is None


def test_a_rank_declared_from_one_run_matches_another_rank():
    def failure(rank):
        return (
            f"RuntimeError: Process {rank} exited with error code 10 and exception:\n"
            f'Traceback (most recent call last):\n  File "{RUNFILES}t.py", line 3, in f\n'
        )

    for written in ("RuntimeError: Process 1 exited", "RuntimeError: Process R exited"):
        for rank in (0, 1, 3):
            assert _fail(written).matched(failure(rank)) == "RuntimeError: Process R exited"


def test_what_folding_keeps_still_tells_failures_apart():
    entry = _fail(_lists_differ("/work/main/").splitlines()[0])
    other_diff = _lists_differ("/work/main/").replace("aten.mm.default", "aten.mm.out")
    assert entry.matched(other_diff) is None
    other_type = "ValueError" + _lists_differ(RUNFILES).removeprefix("AssertionError")
    assert entry.matched(other_type) is None
    ranks = _fail("RuntimeError: Process 1 exited with error code 10")
    assert ranks.matched("RuntimeError: Process 3 terminated or timed out after 300 s") is None
    assert ranks.matched("ValueError: Process 1 exited with error code 10 and exception") is None
    exit_code = _fail("AssertionError: Expected exit code 0 but got -11 for pid: 48213")
    assert exit_code.matched("AssertionError: Expected exit code 0 but got -11 for pid: 7")
    assert exit_code.matched("AssertionError: Expected exit code 0 but got -6 for pid: 7") is None
    assert ranks.mismatch("RuntimeError: Thread 1 exited with exception:") == (
        "the failure's message does not start with 'Process R exited with error code 10': "
        "'Thread R exited with exception:'"
    )


def test_the_shortest_match_is_measured_once_folded(tmp_path):
    # 16 characters as written, 5 once the address is folded: too few to name one failure.
    path = tmp_path / "t.expectations.toml"
    path.write_text(
        '[[expect]]\ntest = "t.py::test_a"\noutcome = "fail"\nreason = "r"\n'
        'match = "ValueError: at 0x7f00deadbeef"\n'
    )
    with pytest.raises(expectations.ExpectationError, match=r"fewer than 8 .* \('at 0x\?'"):
        expectations.load(str(path), ["cpu"])


def test_a_skip_reason_is_folded_as_a_failure_is(two_roots):
    skip = expectations.Entry(1, "t.py::test_a", "skip", "r", f"no data in {CHECKOUT}data/x.pt")
    assert skip.matched(f"no data in {RUNFILES}data/x.pt, skipping") == "no data in data/x.pt"
    assert skip.matched(f"no data in {RUNFILES}data/y.pt, skipping") is None


def test_a_skip_declared_beside_the_file_holds_in_its_package():
    # add_test measured test_init.py with its folder as the root; the target imports it as
    # upstream.tensor.test_init: the DTensor bench's two red targets on a GPU host.
    measured = "Previous test failed, skipping test_init.DTensorConstructorTest.test_full"
    skip = expectations.Entry(
        1, "test_init.py::DTensorConstructorTest::test_full", "skip", "r", measured
    )
    in_target = measured.replace("test_init.", "upstream.tensor.test_init.", 1)
    assert skip.matched(in_target) == measured
    assert skip.matched(in_target.replace("test_full", "test_ones")) is None
