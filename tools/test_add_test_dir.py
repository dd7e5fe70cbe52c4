"""tools/add_test.py DIR (tools/addtest/directory_mode.py): a directory's BUILD.bazel and
expectations files in one command, measured outcomes proposed, and a re-run that keeps what a
person wrote.

The merges are checked on their own (fast); one directory of two upstream-style files is
measured in this test's interpreter (@pypi's, as add_test uses) and written as a user would.
"""

import os
import pathlib
import sys
import textwrap
import tomllib

import pytest

from tools.addtest import directory_mode, environment, measure, merge, stanza
from tools.runner.session import expectations

SHAPES = """
import unittest

from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.triton_utils import requires_gpu


class TestShapes(TestCase):
    @unittest.expectedFailure
    def test_known_to_fail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_known_to_fail_but_passes(self):
        pass

    def test_breaks_on_this_torch(self):
        raise ValueError("the widget count is wrong at 0x7f00deadbeef again")

    @unittest.skip("needs a widget (none here)")
    def test_needs_a_widget(self):
        pass

    @requires_gpu
    def test_on_a_gpu(self):
        pass

    def test_fine(self):
        pass
"""

PLAIN = """
def test_plain():
    assert True
"""


def _environment() -> environment.Environment:
    return environment.Environment.of_this_interpreter()


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("upstream_dir")
    (directory / "test_shapes.py").write_text(SHAPES)
    (directory / "test_plain.py").write_text(PLAIN)
    files = directory_mode.test_files(directory)
    # As on a host without GPUs, wherever this test runs: its GPU case is not measured.
    return directory, directory_mode.measure(files, _environment(), run=True, jobs=2, gpus=0)


def test_a_directory_is_written_in_one_command(measured):
    directory, results = measured
    said, status = directory_mode.write(directory, results, _environment(), ran=True)
    assert status == 0, said
    build = (directory / "BUILD.bazel").read_text()
    assert build.count(merge.MARKER) == 2
    assert 'name = "test_plain",' in build and 'name = "test_shapes",' in build
    assert 'expectations = "test_shapes.expectations.toml",' in build
    assert build.rstrip().endswith("torch_test_suites()")
    shapes = build[build.index('name = "test_shapes"') :]
    assert '"gpu",' in shapes and 'triton = ["gpu"],' in shapes  # requires_gpu: a GPU test
    assert not (directory / "test_plain.expectations.toml").exists()

    toml = directory / "test_shapes.expectations.toml"
    entries = {e["test"]: e for e in tomllib.loads(toml.read_text())["expect"]}
    # An expected failure that failed needs no entry (and is no skip), one that passed is
    # proposed as a pass; the GPU test did not run here.
    assert sorted(entries) == [
        "test_shapes.py::TestShapes::test_breaks_on_this_torch",
        "test_shapes.py::TestShapes::test_known_to_fail_but_passes",
        "test_shapes.py::TestShapes::test_needs_a_widget",
    ]
    assert entries["test_shapes.py::TestShapes::test_needs_a_widget"] == {
        "test": "test_shapes.py::TestShapes::test_needs_a_widget",
        "outcome": "skip",
        "reason": "needs a widget (none here)",
        "match": "needs a widget (none here)",
        "variants": ["cpu"],
    }
    fail = entries["test_shapes.py::TestShapes::test_breaks_on_this_torch"]
    assert fail["match"] == "ValueError: the widget count is wrong at 0x? again"  # folded
    assert fail["proposed"] is True
    torch = f"torch {results[directory / 'test_shapes.py']['torch']}"
    assert entries["test_shapes.py::TestShapes::test_known_to_fail_but_passes"] == {
        "test": "test_shapes.py::TestShapes::test_known_to_fail_but_passes",
        "outcome": "pass",
        "reason": f"expected to fail, passes on {torch} as measured by add_test",
        "variants": ["cpu"],
        "proposed": True,
    }
    assert (
        "1 skipped, 1 failed (proposed), 1 failed as expected, 1 passed against their "
        "expectation (proposed)"
    ) in "\n".join(said)

    # The runner refuses the proposal, naming it, until a person removes `proposed = true`.
    with pytest.raises(expectations.ExpectationError, match="a proposed entry .*breaks_on"):
        expectations.load(str(toml), ["cpu", "gpu"])
    toml.write_text(toml.read_text().replace("proposed = true\n", ""))
    confirmed = {e.test: e for e in expectations.load(str(toml), ["cpu", "gpu"])}
    text = "ValueError: the widget count is wrong at 0x7f00deadbeef again"
    assert confirmed[fail["test"]].matched(text) == fail["match"]
    assert confirmed["test_shapes.py::TestShapes::test_known_to_fail_but_passes"].outcome == "pass"

    # Again, on the same measurements: the confirmed entry is the person's and is kept.
    before = {p.name: p.read_text() for p in directory.iterdir()}
    said, status = directory_mode.write(directory, results, _environment(), ran=True)
    assert status == 0
    assert {p.name: p.read_text() for p in directory.iterdir()} == before
    assert not [line for line in said if "BUILD.bazel:" in line or ".toml:" in line], said


def test_an_expected_failure_is_no_skip(measured):
    directory, results = measured
    result = results[directory / "test_shapes.py"]
    assert [n for n, _ in result["skips"]] == ["test_shapes.py::TestShapes::test_needs_a_widget"]
    assert result["xfails"] == ["test_shapes.py::TestShapes::test_known_to_fail"]


ON_A_GPU = """
import unittest

from test_utils.hardware import requires_gpus


class TestOnAGpu(unittest.TestCase):
    @requires_gpus(1)
    def test_breaks_on_the_gpu(self):
        raise ValueError("the gpu case's widget count is wrong")

    def test_on_cpu(self):
        pass
"""


def test_on_a_gpu_host_the_gpu_cases_are_measured_and_written_for_their_variant(tmp_path):
    directory = tmp_path / "gpu_dir"
    directory.mkdir()
    (directory / "test_on_a_gpu.py").write_text(ON_A_GPU)
    files = directory_mode.test_files(directory)
    # One GPU, as told (the case needs none): its gpu variant runs after the cpu one.
    results = directory_mode.measure(files, _environment(), run=True, jobs=1, gpus=1)
    said, status = directory_mode.write(directory, results, _environment(), ran=True)
    assert status == 0, said
    line = said[0]
    assert "cpu cases measured: 0 skipped, 0 failed (proposed)" in line
    assert "gpu cases measured: 0 skipped, 1 failed (proposed)" in line
    toml = directory / "test_on_a_gpu.expectations.toml"
    (entry,) = tomllib.loads(toml.read_text())["expect"]
    assert entry["variants"] == ["gpu"] and entry["proposed"] is True
    assert entry["match"] == "ValueError: the gpu case's widget count is wrong"
    toml.write_text(toml.read_text().replace("proposed = true\n", ""))
    (confirmed,) = expectations.load(str(toml), ["cpu", "gpu"])
    assert confirmed.variants == ("gpu",)


# Upstream's test_fake.py initializes a process group it never destroys; test_monotonic_compile.py
# initializes one only where none is. Each passes alone (plain pytest runs a file a process); in
# one pack's process the second found the first's group and failed otherwise (DTensor, 2026-12-03).
LEAVES_A_GROUP = """
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore


def test_a_group_of_its_own():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    assert dist.get_world_size() == 2
"""

NEEDS_NO_GROUP = """
import torch.distributed as dist


def test_starts_with_no_group():
    assert not dist.is_initialized()
"""


def test_files_that_read_otherwise_in_one_process_get_targets_of_their_own(tmp_path):
    (tmp_path / "test_a_leaves_a_group.py").write_text(LEAVES_A_GROUP)
    (tmp_path / "test_b_needs_none.py").write_text(NEEDS_NO_GROUP)
    env = _environment()
    results = directory_mode.measure(directory_mode.test_files(tmp_path), env, True, 2, 0)
    assert all(not r["fails"] for r in results.values()), results  # each passes alone

    def together(paths, labels, requires):
        return measure.together(paths, env, labels, requires)

    said, status = directory_mode.write(tmp_path, results, env, ran=True, together=together)
    assert status == 0, said
    build = (tmp_path / "BUILD.bazel").read_text()
    assert 'name = "test_a_leaves_a_group",' in build, build
    assert 'name = "test_b_needs_none",' in build and "packed_" not in build, build
    (line,) = [line for line in said if "NOT PACKED" in line]
    assert "test_b_needs_none.py::test_starts_with_no_group: failed AssertionError" in line, line
    assert line.endswith("alone: passed"), line


THREE_RANKS = """
from torch.testing._internal.common_distributed import MultiProcessTestCase
from torch.testing._internal.common_utils import run_tests


class TestThreeRanks(MultiProcessTestCase):
    @property
    def world_size(self):
        return 3

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_each_rank_knows_the_world(self):
        self.assertEqual(self.world_size, 3)


if __name__ == "__main__":
    run_tests()
"""


def test_a_file_whose_case_runs_ranks_holds_as_many_cores(tmp_path):
    # A 2-rank gloo case of DTensor's took 276 s of torch's 300 s per-case limit alone on 2
    # cores, and timed out in its target beside another (2026-12-03): Bazel must hold the
    # ranks' cores, whatever the target's size.
    (tmp_path / "test_ranks.py").write_text(THREE_RANKS)
    (tmp_path / "test_plain.py").write_text(PLAIN)
    env = _environment()
    results = directory_mode.measure(directory_mode.test_files(tmp_path), env, True, 2, 0)
    said, status = directory_mode.write(tmp_path, results, env, ran=True)
    assert status == 0, said
    build = (tmp_path / "BUILD.bazel").read_text()
    # Its stanza (its own, or the pack it joined: both files are cheap) holds 3 cores.
    (ranks,) = [s for s in build.split("torch_test(")[1:] if "test_ranks" in s]
    assert 'tags = ["cpu:3"],' in ranks, build
    assert build.count("cpu:") == 1, build
    assert any('tags = ["cpu:3"]: a case runs 3 rank processes at once' in s for s in said), said
    # A re-run that measures nothing (the files unchanged) keeps the tag from the record.
    said, status = directory_mode.write(tmp_path, {}, env, ran=True)
    assert status == 0 and (tmp_path / "BUILD.bazel").read_text() == build, said


# ---- the merges, on their own


def _fail(test: str, match: str) -> dict:
    return {
        "test": test,
        "outcome": "fail",
        "reason": "fails on torch 2.13.0 as measured by add_test",
        "match": match,
        "variants": ["cpu"],
        "proposed": True,
    }


def test_a_rerun_replaces_only_what_it_wrote_and_says_what_it_did():
    a, b = (
        _fail("t.py::test_a", "ValueError: first message"),
        _fail("t.py::test_b", "KeyError: b's key here"),
    )
    text, said = merge.merge_entries(None, [a, b], "t.expectations.toml")
    assert said == [
        "t.expectations.toml: added a PROPOSED fail entry for t.py::test_a",
        "t.expectations.toml: added a PROPOSED fail entry for t.py::test_b",
    ]
    assert merge.merge_entries(text, [a, b], "t.toml") == (text, [])

    # A person confirms test_a; test_b now fails otherwise; test_c is new.
    text = text.replace(
        'match = "ValueError: first message"\nvariants = ["cpu"]\nproposed = true\n',
        'match = "ValueError: first message"\nvariants = ["cpu"]\n',
    )
    a2 = _fail("t.py::test_a", "ValueError: another message")
    b2 = _fail("t.py::test_b", "KeyError: b's other key")
    c = _fail("t.py::test_c", "TypeError: c is new here")
    new, said = merge.merge_entries(text, [a2, b2, c], "t.toml")
    assert said == [
        "t.toml: kept the entry for t.py::test_a as edited; measured now: fail, "
        "match = 'ValueError: another message'",
        "t.toml: updated the entry for t.py::test_b",
        "t.toml: added a PROPOSED fail entry for t.py::test_c",
    ]
    entries = {e["test"]: e for e in tomllib.loads(new)["expect"]}
    assert entries["t.py::test_a"]["match"] == "ValueError: first message"  # the person's
    assert "proposed" not in entries["t.py::test_a"]
    assert entries["t.py::test_b"]["match"] == "KeyError: b's other key"

    # test_b passes now: what add_test wrote goes; the person's entry stays.
    new, said = merge.merge_entries(new, [c], "t.toml")
    assert said == ["t.toml: removed the entry for t.py::test_b: not measured any more"]
    assert sorted(e["test"] for e in tomllib.loads(new)["expect"]) == [
        "t.py::test_a",
        "t.py::test_c",
    ]


def test_an_expected_failure_that_passed_is_proposed_as_a_pass_and_merged(tmp_path):
    result = {"torch": "2.15.0", "xpassed": ["t.py::T::test_fixed"]}
    (entry,) = stanza.proposals(tmp_path / "t.py", result).entries
    assert entry == {
        "test": "t.py::T::test_fixed",
        "outcome": "pass",
        "reason": "expected to fail, passes on torch 2.15.0 as measured by add_test",
        "variants": ["cpu"],
        "proposed": True,
    }
    text, said = merge.merge_entries(None, [entry], "t.toml")
    assert said == ["t.toml: added a PROPOSED pass entry for t.py::T::test_fixed"]
    toml = tmp_path / "t.expectations.toml"
    toml.write_text(text)
    with pytest.raises(expectations.ExpectationError, match="a proposed entry .*'pass'"):
        expectations.load(str(toml), ["cpu"])
    # Confirmed by a person; measured failing again (as it expects): kept, the change said.
    text = text.replace("proposed = true\n", "")
    toml.write_text(text)
    (confirmed,) = expectations.load(str(toml), ["cpu"])
    assert (confirmed.outcome, confirmed.reason) == ("pass", entry["reason"])
    fail = _fail("t.py::T::test_fixed", "AssertionError: broke again")
    assert merge.merge_entries(text, [fail], "t.toml") == (
        text,
        [
            "t.toml: kept the entry for t.py::T::test_fixed as edited; measured now: fail, "
            "match = 'AssertionError: broke again'"
        ],
    )
    kept, said = merge.merge_entries(text, [dict(entry, reason="x")], "t.toml")
    assert (kept, said) == (text, [])  # the same outcome: nothing to say


def test_an_entry_written_by_hand_is_kept_and_covers_what_it_names():
    by_hand = textwrap.dedent("""\
        # ours
        [[expect]]
        test = "t.py::test_p*"
        outcome = "skip"
        reason = "ours"
        match = "needs a widget"
        count = 2
        """)
    skip = {"test": "t.py::test_p1", "outcome": "skip", "reason": "x", "match": "needs a widget"}
    new, said = merge.merge_entries(by_hand, [skip], "t.toml")
    assert (new, said) == (by_hand, [])
    other = dict(skip, match="needs two widgets")
    new, said = merge.merge_entries(by_hand, [other], "t.toml")
    assert new == by_hand
    assert said == [
        "t.toml: kept the entry for t.py::test_p* as written by hand; measured now: skip, "
        "match = 'needs two widgets'"
    ]


STANZA_A = 'torch_test(\n    name = "test_a",\n    deps = ["//test_utils:torch_testing"],\n)'
STANZA_B = 'torch_test(\n    name = "test_b",\n    deps = ["//test_utils:torch_testing"],\n)'


def test_build_stanzas_are_added_updated_kept_and_removed():
    text, said = merge.merge_build(None, {"test_a.py": STANZA_A, "test_b.py": STANZA_B})
    assert said == [
        "BUILD.bazel: added test_a.py's stanza",
        "BUILD.bazel: added test_b.py's stanza",
    ]
    assert text.startswith('load("//tools/build_defs:torch_test.bzl"')
    assert text.rstrip().endswith("torch_test_suites()")
    assert merge.merge_build(text, {"test_a.py": STANZA_A, "test_b.py": STANZA_B}) == (
        text,
        [],
    )
    # A formatter's reflow is no edit: one line, keywords reordered.
    reflowed = text.replace(
        STANZA_B, 'torch_test(deps = ["//test_utils:torch_testing"], name = "test_b")'
    )
    gpu_b = STANZA_B.replace("    deps", '    variants = ["cpu", "gpu"],\n    deps')
    new, said = merge.merge_build(reflowed, {"test_a.py": STANZA_A, "test_b.py": gpu_b})
    assert said == ["BUILD.bazel: updated test_b.py's stanza"] and gpu_b in new

    # A person's edit (a shard count) is kept, with what add_test would write now.
    edited = new.replace('    name = "test_a",\n', '    name = "test_a",\n    shard_count = 2,\n')
    gpu_a = STANZA_A.replace("    deps", '    variants = ["cpu", "gpu"],\n    deps')
    new, said = merge.merge_build(edited, {"test_a.py": gpu_a, "test_b.py": gpu_b})
    assert new == edited
    assert said == [
        f"BUILD.bazel: kept test_a.py's stanza as edited; add_test would write:\n{gpu_a}"
    ]

    # test_b.py is gone: its stanza goes; one that could not be measured stays as it is.
    new, said = merge.merge_build(edited, {"test_a.py": None})
    assert said == ["BUILD.bazel: removed test_b.py's stanza: the file is gone"]
    assert 'name = "test_b"' not in new and "shard_count = 2" in new


def test_runs_on_a_directory_from_the_command_line_usage(tmp_path):
    # A directory outside the repository is refused before anything is measured.
    with pytest.raises(SystemExit, match="is not a directory of this repository"):
        directory_mode.main(tmp_path, run=True, jobs=1)


if __name__ == "__main__":
    os.chdir(pathlib.Path(__file__).parents[1])
    sys.exit(pytest.main([__file__]))
