"""What upstream directories showed add_test DIR had to handle with no hand fix: a helper
module beside the tests (PyTorch's test/distributed imports its model_registry.py as a
top-level module) gets a py_library the tests depend on, with the directory on their path; a
failure followed by a teardown error is proposed with both; a file named like a test that
collects nothing gets no target."""

import ast
import pathlib
import tomllib

from tools import add_test, add_test_dir
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
    assert add_test_dir.helper_files(tmp_path, results) == ["layers_helper.py"]


def test_helpers_get_a_py_library_that_is_updated_removed_and_kept_when_edited():
    text, said = add_test_dir.merge_helpers(None, ["layers_helper.py"])
    (library,) = _calls(text, "py_library")
    assert library == {"name": "helpers", "srcs": ["layers_helper.py"], "imports": ["."]}
    assert text.startswith('load("//tools/build_defs:python.bzl", "py_library")'), text
    assert said == ["BUILD.bazel: added the py_library helpers: layers_helper.py"]
    assert add_test_dir.merge_helpers(text, ["layers_helper.py"]) == (text, [])

    grown, said = add_test_dir.merge_helpers(text, ["a_helper.py", "layers_helper.py"])
    (library,) = _calls(grown, "py_library")
    assert library["srcs"] == ["a_helper.py", "layers_helper.py"], said

    gone, said = add_test_dir.merge_helpers(grown, [])
    assert not _calls(gone, "py_library") and _calls(gone, "torch_test_suites"), said

    edited = text.replace('imports = ["."],', 'imports = ["."],\n    tags = ["mine"],')
    kept, said = add_test_dir.merge_helpers(edited, [])
    assert kept == edited and "kept" in said[0]


def _failure(kind: str, msg: str) -> dict:
    return {"type": kind, "msg": msg, "skip": False, "xfail": False}


def test_a_failure_then_a_teardown_error_is_proposed_with_both():
    # A callback registry left dirty by the failed call: its teardown fails too.
    first = _failure("AssertionError", "the counter read 3 where 2 was wanted")
    later = _failure("AssertionError", "registry still holds 1 pending hook at 0x7f00deadbeef")
    result = {"torch": "2.13.0", "fails": [["x.py::TestHooks::test_count", first, later]]}
    proposed = add_test.proposals(pathlib.Path("test_hooks.py"), result)
    (entry,) = proposed.entries
    assert entry["match"] == "AssertionError: the counter read 3 where 2 was wanted"
    assert entry["teardown"] == "AssertionError: registry still holds 1 pending hook at"
    assert entry["proposed"] is True and not proposed.notes
    # The runner reads the entry as written once confirmed, teardown included.
    toml = tomllib.loads(add_test.entry_text(entry))["expect"][0]
    del toml["proposed"]
    read = expectations._entry("test_hooks.expectations.toml", 0, toml, ["cpu"])
    assert read.teardown_matched(f"AssertionError: {later['msg']}")


def test_a_file_that_collects_no_case_gets_no_stanza(tmp_path):
    (tmp_path / "test_shared_globals.py").write_text("VALUE = 1\n")
    result = {"placed": {}, "errors": [], "modules": {}}

    class Env:
        manifest = {}

    said, status = add_test_dir.write(
        tmp_path, {tmp_path / "test_shared_globals.py": result}, Env(), ran=True
    )
    assert status == 0
    assert "torch_test(" not in (tmp_path / "BUILD.bazel").read_text(), said
    assert any("NO TEST CASES" in line for line in said), said
