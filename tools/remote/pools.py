"""Reads the pool data: POOL_KEY from tools/build_defs/pools.bzl, each variant's pool from the
variant table (tools/build_defs/variants.bzl).

The rig must route by exactly what the targets carry, so it reads the .bzl files that define it
instead of repeating pool names (tools/hardware/table.py: their data are plain literals,
hence valid Python).
"""

import pathlib

from tools.hardware.table import ROOT, read_literals, table

POOLS_BZL = ROOT / "tools" / "build_defs" / "pools.bzl"


def read_pools(path: pathlib.Path = POOLS_BZL) -> tuple[str, dict[str, str]]:
    """(POOL_KEY, {variant: pool})."""
    key = read_literals(path).get("POOL_KEY")
    if key is None:
        raise SystemExit(f"{path}: no literal assignment of POOL_KEY")
    return key, {variant: spec["pool"] for variant, spec in table()["VARIANTS"].items()}


if __name__ == "__main__":
    key, pools = read_pools()
    for variant, pool in pools.items():
        print(f"{variant} {key}={pool}")
