"""add_test DIR on a tree, from made-up measurements (no torch): every sub-folder holding test
files gets a BUILD file of its own (a Bazel package), and what is skipped is said, with why. A
re-run measures only the files whose content changed, changes only their targets and says only
true things; a pack stays as it is until its cost moves past the margin."""

import pathlib

import pytest

from tools.addtest import directory_mode, merge, pack, record


class Env:
    manifest = {"packages": {"torch": "2.13.0"}}
    described = "made-up measurements"


def result(cases: int, seconds: float = 30.0, variant: str = "cpu") -> dict:
    placed = {f"x.py::T::test_{i}": [variant, []] for i in range(cases)}
    return {
        "placed": placed,
        "modules": {},
        "dists": {},
        "requires": {},
        "errors": [],
        "torch": "2.13.0",
        "seconds": seconds,
        "skips": [],
        "xfails": [],
        "xpassed": [],
        "fails": [],
    }


class Measurer:
    """measure()'s stand-in: a made-up result per file, each file it was asked for recorded."""

    def __init__(self, results: dict[str, dict] | None = None):
        self.results = results or {}
        self.asked = []

    def __call__(self, files, env, run, jobs, gpus):
        self.asked += [f.name for f in files]
        return {f: self.results.get(f.name) or result(2) for f in files}


def _tree(top: pathlib.Path, files: list[str]) -> None:
    for name in files:
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("def test_0():\n    pass\n")


def test_a_tree_gets_a_build_file_per_package_and_says_what_it_skipped(tmp_path):
    top = tmp_path / "suite"
    _tree(
        top,
        [
            "dynamo/test_one.py",
            "dynamo/inner/test_two.py",
            "distributed/fsdp/test_three.py",
            ".cache/test_hidden.py",
            "dynamo/__pycache__/test_one.cpython-311.pyc",
            "vendored/WORKSPACE",
            "vendored/test_theirs.py",
        ],
    )
    (top / "distributed" / "notes.txt").write_text("no tests here")
    (top / "linked").symlink_to(top / "dynamo")
    said, measurer = [], Measurer()
    status = directory_mode.run_tree(top, Env(), True, 1, 0, said.append, measure=measurer)
    assert status == 0, said
    written = sorted(p.parent.relative_to(top).as_posix() for p in top.rglob("BUILD.bazel"))
    assert written == ["distributed/fsdp", "dynamo", "dynamo/inner"]
    assert sorted(measurer.asked) == ["test_one.py", "test_three.py", "test_two.py"]
    inner = (top / "dynamo" / "inner" / "BUILD.bazel").read_text()
    assert 'name = "test_two",' in inner and "test_one" not in inner
    skipped = [line for line in said if line.startswith("# skipped ")]
    assert skipped == [
        "# skipped suite/: no test_*.py files, no BUILD file written",
        "# skipped suite/.cache/: not entered: hidden",
        "# skipped suite/distributed/: no test_*.py files, no BUILD file written",
        "# skipped suite/dynamo/__pycache__/: not entered: Python's bytecode cache",
        "# skipped suite/linked/: not entered: a link to a directory (not followed)",
        "# skipped suite/vendored/: not entered: another Bazel workspace",
    ]
    assert "## suite/dynamo/inner/BUILD.bazel" in said


def test_a_tree_with_no_test_file_anywhere_says_so(tmp_path):
    _tree(tmp_path / "empty", ["docs/readme.md"])
    with pytest.raises(
        SystemExit, match=r"no test_\*\.py files in it or its sub-folders"
    ) as refused:
        directory_mode.run_tree(tmp_path / "empty", Env(), True, 1, 0, print, Measurer())
    assert "empty/docs/: no test_*.py files" in str(refused.value)


# ---- re-runs: only the files whose content changed are measured, and only their targets change


def _stanzas(directory: pathlib.Path) -> dict[str, str]:
    text = (directory / "BUILD.bazel").read_text()
    return {block.key: "".join(block.lines) for _, _, block in merge.read_build(text)[1]}


def _run(directory, measurer, **how) -> list[str]:
    said = []
    status = directory_mode.run_tree(directory, Env(), True, 1, 0, said.append, measurer, **how)
    assert status == 0, said
    return said


def _failing(cases: int, gpu_case: bool = False) -> dict:
    measured = result(cases)
    if gpu_case:
        measured["placed"][f"x.py::T::test_{cases - 1}"] = ["gpu", []]
    error = {"type": "ValueError", "msg": "the widget count is wrong"}
    measured["fails"] = [["x.py::T::test_0", error, None]]
    return measured


def test_a_rerun_after_a_one_file_edit_changes_only_that_files_target(tmp_path):
    _tree(tmp_path, ["test_a.py", "test_b.py"])  # each costs a target of its own
    _run(tmp_path, Measurer())
    stanzas = _stanzas(tmp_path)
    assert sorted(stanzas) == ["test_a.py", "test_b.py"]
    assert (tmp_path / record.RECORD).is_file()

    (tmp_path / "test_a.py").write_text("def test_0():\n    assert False\n")
    measurer = Measurer({"test_a.py": _failing(3, gpu_case=True)})
    said = _run(tmp_path, measurer)
    assert measurer.asked == ["test_a.py"]
    now = _stanzas(tmp_path)
    assert now["test_b.py"] == stanzas["test_b.py"] and now["test_a.py"] != stanzas["test_a.py"]
    assert 'variants = [\n        "cpu",\n        "gpu",\n    ],' in now["test_a.py"]
    assert sorted(p.name for p in tmp_path.glob("*.toml")) == ["test_a.expectations.toml"]
    about = [line for line in said if not line.startswith("#")]
    assert about == [
        "test_a.py: cpu=2 gpu=1; cpu cases measured: 0 skipped, 1 failed (proposed), 0 failed "
        "as expected, 0 passed against their expectation (proposed)",
        "    new case: test_a.py::T::test_2 (gpu)",
        "test_b.py: unchanged since the last run, not measured again: cpu=2",
        "test_a.expectations.toml: added a PROPOSED fail entry for test_a.py::T::test_0",
        "BUILD.bazel: updated test_a.py's stanza",
        f"{record.RECORD}: written (what was measured, by each file's content)",
    ]

    # Nothing changed: nothing measured, no file written, nothing said but that.
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    measurer = Measurer()
    said = _run(tmp_path, measurer)
    assert measurer.asked == [] and {p.name: p.read_text() for p in tmp_path.iterdir()} == before
    assert [line for line in said if not line.startswith("#")] == [
        "test_a.py: unchanged since the last run, not measured again: cpu=2 gpu=1",
        "test_b.py: unchanged since the last run, not measured again: cpu=2",
    ]
    # Asked to: everything is measured again (as measured before: nothing changes).
    measurer = Measurer({"test_a.py": _failing(3, gpu_case=True)})
    _run(tmp_path, measurer, remeasure=True)
    assert measurer.asked == ["test_a.py", "test_b.py"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_a_pack_stays_as_it_is_unless_its_cost_moved_past_the_margin(tmp_path):
    limit = pack.alone_at()
    _tree(tmp_path, ["test_a.py", "test_b.py"])
    # Together just under a lone file's cost: one pack.
    _run(tmp_path, Measurer({"test_a.py": result(2, limit * 0.5), "test_b.py": result(2, 7.9)}))
    assert list(_stanzas(tmp_path)) == ["packed_test_a"]
    packed = _stanzas(tmp_path)["packed_test_a"]

    # test_a costs a little more: planned afresh the pair would no longer fit; it is kept.
    (tmp_path / "test_a.py").write_text("def test_0():\n    pass\n\n\n# edited\n")
    said = _run(tmp_path, Measurer({"test_a.py": result(2, limit * 0.55)}))
    assert _stanzas(tmp_path) == {"packed_test_a": packed}, said

    # test_a costs several times more: re-planned, and each line about it is true.
    (tmp_path / "test_a.py").write_text("def test_0():\n    pass\n\n\n# edited again\n")
    said = _run(tmp_path, Measurer({"test_a.py": result(2, limit * 3)}))
    assert sorted(_stanzas(tmp_path)) == ["test_a.py", "test_b.py"]
    assert (
        "BUILD.bazel: removed packed_test_a's stanza: test_a.py is in test_a.py's stanza now, "
        "test_b.py is in test_b.py's stanza now"
    ) in said
    assert not [line for line in said if "gone" in line], said
