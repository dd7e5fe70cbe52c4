"""Reads the hardware variant table (tools/build_defs/variants.bzl) from Python.

The table is Starlark, but its data are plain literals assigned to names (a name may refer to an
earlier one, e.g. GPU_ENV), which is also valid Python: read them with `ast` instead of
repeating them here. //test_utils/tests:test_hardware_table checks that this reading equals the
table as Starlark evaluates it. Standard library only: tools/remote/pools.py uses it outside
Bazel, under the rig's interpreter.
"""

import ast
import functools
import os
import pathlib

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["table"]

# Not resolved: inside Bazel this is the runfiles tree, whose variants.bzl is a declared input.
ROOT = pathlib.Path(os.path.abspath(__file__)).parents[2]
VARIANTS_BZL = ROOT / "tools" / "build_defs" / "variants.bzl"


def _literal(node: ast.AST, names: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise ValueError(f"name {node.id!r} is not a literal assigned above")
    if isinstance(node, ast.Dict):
        return {
            _literal(k, names): _literal(v, names)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, names) for e in node.elts]
    raise ValueError(f"line {node.lineno}: not a plain literal")


def read_literals(path: pathlib.Path) -> dict:
    """Every top-level `NAME = <literal>` of a .bzl file, names resolved in order."""
    names = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    names[target.id] = _literal(node.value, names)
                except ValueError:
                    pass  # computed in Starlark; not data this reader serves
    return names


@functools.cache
def table(path: pathlib.Path = VARIANTS_BZL) -> dict:
    """{"VARIANTS": {...}, "FEATURES": {...}, ...} of variants.bzl."""
    if not path.exists():
        raise SystemExit(f"{path} is missing: a Bazel target reading it must have it in data")
    values = read_literals(path)
    missing = {"VARIANTS", "FEATURES"} - values.keys()
    if missing:
        raise SystemExit(f"{path}: no literal assignment of {sorted(missing)}")
    return values
