"""add_test DIR on a tree, from made-up measurements (no torch): every sub-folder holding test
files gets a BUILD file of its own (a Bazel package), and what is skipped is said, with why."""

import pathlib

import pytest

from tools.addtest import directory_mode


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
