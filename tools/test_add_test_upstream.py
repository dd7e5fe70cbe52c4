"""What upstream directories showed add_test DIR had to handle with no hand fix: a helper
module beside the tests (PyTorch's test/distributed imports its model_registry.py as a
top-level module) gets a py_library the tests depend on, with the directory on their path; a
failure followed by a teardown error is proposed with both; a file named like a test that
collects nothing gets no target; a file whose failure pytest cannot format (an INTERNALERROR
that ends the run, as torch's dynamo tests caused under CPython 3.11) runs to its end with
Python's traceback formatter, and its stanza says so; a failure whose message follows set
order is measured with the hash seed a target's test process gets, so its match holds there."""

import ast
import os
import pathlib
import subprocess
import sys
import tomllib

from tools.addtest import directory_mode, environment, measure, merge, stanza
from tools.runner import collection
from tools.runner.session import expectations


def _calls(text: str, function: str) -> list[dict]:
    found = []
    for node in ast.parse(text).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == function:
            found.append({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return found


def _result(modules: dict) -> dict:
    return {"modules": modules, "placed": {}}


def test_an_imported_helper_module_of_the_directory_is_a_helper(tmp_path):
    (tmp_path / "layers_helper.py").write_text("")
    (tmp_path / "test_a.py").write_text("")
    results = {
        tmp_path / "test_a.py": _result(
            {
                "layers_helper": str(tmp_path / "layers_helper.py"),
                "test_a": str(tmp_path / "test_a.py"),  # the file itself
                "json": "/usr/lib/python3/json/__init__.py",  # not the directory's
            }
        ),
        tmp_path / "test_b.py": "could not be collected",
    }
    assert directory_mode.helper_files(tmp_path, results) == ["layers_helper.py"]


def test_helpers_get_a_py_library_that_is_updated_removed_and_kept_when_edited():
    text, said = merge.merge_helpers(None, ["layers_helper.py"])
    (library,) = _calls(text, "py_library")
    assert library == {"name": "helpers", "srcs": ["layers_helper.py"], "imports": ["."]}
    assert text.startswith('load("//tools/build_defs:python.bzl", "py_library")'), text
    assert said == ["BUILD.bazel: added the py_library helpers: layers_helper.py"]
    assert merge.merge_helpers(text, ["layers_helper.py"]) == (text, [])

    grown, said = merge.merge_helpers(text, ["a_helper.py", "layers_helper.py"])
    (library,) = _calls(grown, "py_library")
    assert library["srcs"] == ["a_helper.py", "layers_helper.py"], said

    gone, said = merge.merge_helpers(grown, [])
    assert not _calls(gone, "py_library") and _calls(gone, "torch_test_suites"), said

    edited = text.replace('imports = ["."],', 'imports = ["."],\n    tags = ["mine"],')
    kept, said = merge.merge_helpers(edited, [])
    assert kept == edited and "kept" in said[0]


def _failure(kind: str, msg: str) -> dict:
    return {"type": kind, "msg": msg, "skip": False, "xfail": False}


def test_a_failure_then_a_teardown_error_is_proposed_with_both():
    # A callback registry left dirty by the failed call: its teardown fails too.
    first = _failure("AssertionError", "the counter read 3 where 2 was wanted")
    later = _failure("AssertionError", "registry still holds 1 pending hook at 0x7f00deadbeef")
    result = {"torch": "2.13.0", "fails": [["x.py::TestHooks::test_count", first, later]]}
    proposed = stanza.proposals(pathlib.Path("test_hooks.py"), result)
    (entry,) = proposed.entries
    assert entry["match"] == "AssertionError: the counter read 3 where 2 was wanted"
    assert entry["teardown"] == "AssertionError: registry still holds 1 pending hook at 0x?"
    assert entry["proposed"] is True and not proposed.notes
    # The runner reads the entry as written once confirmed, teardown included.
    toml = tomllib.loads(stanza.entry_text(entry))["expect"][0]
    del toml["proposed"]
    read = expectations._entry("test_hooks.expectations.toml", 0, toml, ["cpu"])
    assert read.teardown_matched(f"AssertionError: {later['msg']}")


def test_a_proposal_measured_here_holds_where_the_target_runs():
    # Measured here, rank 1 failed first and unittest hid 26 characters of a diff (a path
    # under this checkout); in the target rank 3 fails first and its runfiles path is longer.
    def seq_nr(hidden):
        return (
            f"Lists differ: ['Seq[{hidden} chars]/test_x.py:12|aten.mul.Tensor|linear'] != "
            f"['Seq[{hidden} chars]/test_x.py:12|aten.mm.default|linear']"
        )

    def ranks(rank):
        return f"Process {rank} exited with error code 10 and exception:\nTraceback (most recent"

    fails = [
        ["x.py::TestRanks::test_all_reduce", _failure("RuntimeError", ranks(1)), None],
        ["x.py::TestSeq::test_seq_nr", _failure("AssertionError", seq_nr(26)), None],
    ]
    proposed = stanza.proposals(pathlib.Path("test_x.py"), {"torch": "2.13.0", "fails": fails})
    ranked, diffed = proposed.entries
    assert ranked["match"] == "RuntimeError: Process R exited with error code 10 and exception:"
    assert diffed["match"] == (
        "AssertionError: Lists differ: ['Seq[N chars]/test_x.py:12|aten.mul.Tensor|linear'] != "
        "['Seq[N ch"
    )
    for entry, in_target in ((ranked, f"RuntimeError: {ranks(3)}"), (diffed, seq_nr(168))):
        toml = tomllib.loads(stanza.entry_text(entry))["expect"][0]
        del toml["proposed"]
        read = expectations._entry("test_x.expectations.toml", 0, toml, ["cpu"])
        in_target = in_target if in_target.startswith("Runtime") else f"AssertionError: {in_target}"
        assert read.matched(in_target) == entry["match"], in_target


def test_a_teardown_error_with_no_message_is_declared_by_its_type():
    # torch 2.11's callback registry asserts with no message when a failed call left it dirty.
    first = _failure("TypeError", "CompileId.__init__() takes 1 positional argument")
    result = {
        "torch": "2.11.0",
        "fails": [["x.py::TestHooks::test_count", first, _failure("AssertionError", "")]],
    }
    (entry,) = stanza.proposals(pathlib.Path("test_hooks.py"), result).entries
    assert entry["teardown"] == "AssertionError"
    toml = tomllib.loads(stanza.entry_text(entry))["expect"][0]
    del toml["proposed"]
    read = expectations._entry("test_hooks.expectations.toml", 0, toml, ["cpu"])
    assert read.teardown_matched("AssertionError: ") == "AssertionError"
    assert read.teardown_matched("AssertionError: pending callbacks") is None


def test_a_file_that_collects_no_case_gets_no_stanza(tmp_path):
    (tmp_path / "test_shared_globals.py").write_text("VALUE = 1\n")
    result = {"placed": {}, "errors": [], "modules": {}}

    class Env:
        manifest = {}

    said, status = directory_mode.write(
        tmp_path, {tmp_path / "test_shared_globals.py": result}, Env(), ran=True
    )
    assert status == 0
    assert "torch_test(" not in (tmp_path / "BUILD.bazel").read_text(), said
    assert any("NO TEST CASES" in line for line in said), said


# pytest's long tracebacks parse the test's source (`_pytest._code.source`); CPython 3.11 can
# raise SystemError there once dynamo has run. This file makes that parse fail the same way,
# so its run ends with pytest's INTERNALERROR after the failing case.
UNFORMATTABLE = """
import ast
import sys
import unittest

_parse = ast.parse


def _parse_unless_pytest_formats(*args, **kwargs):
    if sys._getframe(1).f_globals.get("__name__") == "_pytest._code.source":
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")
    return _parse(*args, **kwargs)


class TestFormatting(unittest.TestCase):
    def test_a_fails(self):
        ast.parse = _parse_unless_pytest_formats
        self.assertEqual(1, 2)

    def test_b_passes(self):
        pass

    def test_c_passes(self):
        pass
"""


def test_a_file_that_crashes_pytest_runs_with_native_tracebacks(tmp_path):
    path = tmp_path / "test_unformattable.py"
    path.write_text(UNFORMATTABLE)
    env = environment.Environment.of_this_interpreter()
    result = measure.collect(path, env, run=True)
    assert result["crashed_with_defaults"] == {"started": 1, "exit": measure.PYTEST_CRASHED}
    assert result["exit"] == 1 and result["started"] == 3
    assert result["pytest_args"] == measure.NATIVE_TRACEBACKS
    assert [f[0] for f in result["fails"]] == [
        "test_unformattable.py::TestFormatting::test_a_fails"
    ]
    (note,) = stanza.crash_notes(result)
    assert "after 1 of 3 cases" in note and "ran 3" in note, note

    # add_test DIR: the stanza passes the arguments, and the file is packed with no other.
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    results = {
        path: result,
        tmp_path / "test_plain.py": measure.collect(tmp_path / "test_plain.py", env, run=True),
    }
    said, status = directory_mode.write(tmp_path, results, env, ran=True)
    stanzas = {c["name"]: c for c in _calls((tmp_path / "BUILD.bazel").read_text(), "torch_test")}
    assert sorted(stanzas) == ["test_plain", "test_unformattable"], said
    assert stanzas["test_unformattable"]["args"] == ["--tb=native"]
    assert "args" not in stanzas["test_plain"]
    assert any("PYTEST CRASHED" in line for line in said), said


# Upstream's test_config checks a set of config keys one by one: which key fails first follows
# the set's order, which follows the process's string hash seed.
SET_ORDER = """
KEYS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"}


def test_first_key_of_a_set():
    assert next(iter(KEYS)) == "none of them"
"""


def _first_key(seed: str) -> str:
    code = SET_ORDER + "\nprint(next(iter(KEYS)))"
    env = {**os.environ, collection.SEED_ENV: seed}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return done.stdout.strip()


def test_a_set_ordered_failure_is_measured_with_the_targets_hash_seed(tmp_path, monkeypatch):
    path = tmp_path / "test_set_order.py"
    path.write_text(SET_ORDER)
    # The key a target's test process (the runner's seed) sees first, and a user's shell whose
    # own seed orders the set otherwise: add_test must measure as the target runs.
    first = _first_key(collection.DEFAULT_SEED)
    shell_seed = next(s for s in map(str, range(1, 50)) if _first_key(s) != first)
    monkeypatch.setenv(collection.SEED_ENV, shell_seed)
    env = environment.Environment.of_this_interpreter()
    proposed = stanza.proposals(path, measure.collect(path, env, run=True))
    (entry,) = proposed.entries
    assert entry["match"] == f"AssertionError: assert '{first}' == 'none of them'", entry
