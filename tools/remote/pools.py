"""Reads the pool data (POOL_KEY, POOLS) from tools/build_defs/pools.bzl.

The rig must route by exactly what the targets carry, so it reads the one .bzl that defines it
instead of repeating pool names. Those assignments are plain literals, hence valid Python.
"""

import ast
import pathlib

POOLS_BZL = pathlib.Path(__file__).resolve().parents[1] / "build_defs" / "pools.bzl"


def read_pools(path: pathlib.Path = POOLS_BZL) -> tuple[str, dict[str, str]]:
    """(POOL_KEY, POOLS) as assigned at the top level of `path`."""
    values = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("POOL_KEY", "POOLS"):
                values[target.id] = ast.literal_eval(node.value)
    missing = {"POOL_KEY", "POOLS"} - values.keys()
    if missing:
        raise SystemExit(f"{path}: no literal assignment of {sorted(missing)}")
    return values["POOL_KEY"], values["POOLS"]


if __name__ == "__main__":
    key, pools = read_pools()
    for variant, pool in pools.items():
        print(f"{variant} {key}={pool}")
