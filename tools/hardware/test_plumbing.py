"""The plumbing stays plumbing: tools/hardware/spec.py alone reads the spec and the runtime
record, and every TORCH_TEST_* name the tree uses is one that is defined.

Reads the source tree, so it runs outside Bazel: `python3 -m tools.selftest plumbing`.
"""

import pathlib
import re

from tools.hardware import envvars, table
from tools.selftest import check_docs_paths

ROOT = pathlib.Path(__file__).resolve().parents[2]
READER = "tools/hardware/spec.py"
# Where the names are defined: they may be spelled there.
DEFINITIONS = ("tools/hardware/envvars.bzl", "tools/hardware/envvars.py")
# Dated records of past runs keep the commands as they were run.
RECORDS = "bench/results/"
# Names that are not the tests' environment, each read by one script of its own.
ELSEWHERE = {
    "TORCH_TEST_BAZEL_BUNDLE": "tools/bazel",
    "TORCH_TEST_BAZEL_BUNDLE_CACHE": "tools/bundle/bazel_from_bundle.sh",
}
NAME = re.compile(rf"\b{envvars.PREFIX}[A-Z0-9_]*[A-Z0-9]\b")
ATTRIBUTE = re.compile(r"\benvvars\.([A-Za-z_]\w*)")


def _files() -> dict[str, str]:
    texts = {}
    for path in check_docs_paths.listed(ROOT):
        try:
            texts[path] = (ROOT / path).read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted but not yet committed
    return texts


FILES = _files()


def _is_test(path: str) -> bool:
    name = pathlib.PurePath(path)
    return name.name.startswith("test_") or "tests" in name.parts


def test_only_the_reader_reads_the_spec_and_the_runtime_record():
    # Tests write them as fixtures (spec.Spec(...).env(), spec.Runtime(...).env()); a
    # module that names them could read them behind the reader's back.
    plumbing = re.compile(
        r"envvars\.(SPEC|RUNTIME)\b|PLUMBING\b|" + "|".join(envvars.PLUMBING.values())
    )
    allowed = {READER, *DEFINITIONS, "tools/build_defs/torch_test.bzl", __file__}
    named = [
        f"{path}: {match.group(0)}"
        for path, text in FILES.items()
        if path.endswith(".py") and not _is_test(path) and path not in allowed
        for match in plumbing.finditer(text)
    ]
    assert not named, "read the spec through tools/hardware/spec.py:\n" + "\n".join(named)


def test_every_envvars_name_the_code_uses_is_defined():
    module_names = set(dir(envvars))
    undefined = [
        f"{path}: envvars.{name}"
        for path, text in FILES.items()
        if path.endswith(".py")
        for name in ATTRIBUTE.findall(text)
        if name not in module_names and name not in ("bzl", "py")  # envvars.bzl, a file
    ]
    assert not undefined, "\n".join(undefined)


def test_every_torch_test_variable_the_tree_names_is_defined():
    overrides = {envvars.PREFIX + f.upper() for f in table.table()["FEATURES"]}
    known = set(envvars.NAMES.values()) | overrides | ELSEWHERE.keys()
    unknown = [
        f"{path}: {name}"
        for path, text in FILES.items()
        if not path.startswith(RECORDS)
        for name in sorted(set(NAME.findall(text)) - known)
    ]
    assert not unknown, "not in tools/hardware/envvars.bzl:\n" + "\n".join(unknown)
    for name, path in ELSEWHERE.items():
        assert name in FILES[path], f"{name} is no longer read by {path}"
