"""The pools a GPU host serves, from `nvidia-smi -L` and the variant table; the rig's workers.

A host with N GPUs of one model serves the pool of every GPU variant of at most N GPUs, named as
the table names it with this host's model put in: the table's `gpu-h200-x2` is served as
`gpu-h100-x2` on an H100 host. Pool names carry the model because the pool is part of each GPU
result's cache key (tools/build_defs/pools.bzl).

    python3 -m tools.remote.gpu_host.host_pools workers [--listing FILE]
        one line per worker of this host: NAME CAPACITY ARG... (tools/remote/rig.sh starts them)
    python3 -m tools.remote.gpu_host.host_pools pools [--listing FILE]
        the GPU pools it serves, space-separated (BuildGrid's labels: rig.sh's RIG_EXTRA_POOLS)
    python3 -m tools.remote.gpu_host.host_pools retarget [--listing FILE]
        sed expressions that rename the table's GPU pools to this host's (none if they match)
    python3 -m tools.remote.gpu_host.host_pools tag-filter [--listing FILE]
        --test_tag_filters value leaving out the variants of more GPUs than this host has
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

from tools.hardware.table import table
from tools.remote.pools import read_pools

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)" -> "h100"; the first model-like word.
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID:", re.MULTILINE)
_MODEL = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b")
# The table's GPU pools: gpu-<model>-x<count>.
_POOL = re.compile(r"^gpu-(?P<model>[a-z0-9]+)-x(?P<count>\d+)$")


class HostError(RuntimeError):
    pass


def host_gpus(listing: str) -> tuple[str, int]:
    """(model, count) of the GPUs in an `nvidia-smi -L` listing; one model per host."""
    names = [name for _, name in _GPU_LINE.findall(listing)]
    if not names:
        raise HostError("nvidia-smi -L lists no GPU: this host can serve no GPU pool")
    models = set()
    for name in names:
        found = _MODEL.search(name.removeprefix("NVIDIA "))
        if not found:
            raise HostError(f"no model name (like H100) in nvidia-smi's {name!r}")
        models.add(found.group(1).lower())
    if len(models) > 1:
        raise HostError(f"GPUs of several models on one host: {sorted(models)}")
    return models.pop(), len(names)


def served_pools(model: str, count: int, table_pools: dict[str, str]) -> dict[str, str]:
    """{table pool: this host's pool} for every GPU pool of the table this host can serve."""
    served = {}
    for pool in table_pools.values():
        parts = _POOL.match(pool)
        if parts and int(parts["count"]) <= count:
            served[pool] = f"gpu-{model}-x{parts['count']}"
    if not served:
        raise HostError(
            f"no GPU pool of the table fits {count} GPU(s): {sorted(table_pools.values())}"
        )
    return served


def workers(listing: str, cores: int, dev: str = "/dev") -> list[str]:
    """The rig's workers on this host: `NAME CAPACITY ARG...` lines.

    One cpu worker; one GPU worker for all GPU pools (BuildGrid hands it any mix of their
    actions). Each takes half the cores' worth of actions at once (the GPU one at least two
    per GPU): which GPUs a GPU action uses is decided by the product's lease inside it
    (tools/runner/gpu_lease.py, whose lock folder the worker shares between its sandboxes), so
    two actions never hold the same GPU, GPUs are shared as the lease shares them under host
    mode, and an action beyond what the GPUs take waits in the lease, as it would there.
    """
    key, table = read_pools()
    model, count = host_gpus(listing)
    pools = served_pools(model, count, table)
    cpu = [f"--property={key}={table['cpu']}"]
    gpu = [f"--gpu-devices={dev}", *(f"--property={key}={p}" for p in sorted(set(pools.values())))]
    return [
        " ".join(["cpu", str(max(2, cores // 2)), *cpu]),
        " ".join([f"gpu-{model}", str(max(2 * count, cores // 2)), *gpu]),
    ]


def pools(listing: str) -> list[str]:
    """The pools this host's GPU worker serves (BuildGrid must know them: RIG_EXTRA_POOLS)."""
    _, table = read_pools()
    return sorted(set(served_pools(*host_gpus(listing), table).values()))


def retarget(listing: str) -> list[str]:
    """sed expressions renaming the table's GPU pools to this host's, where they differ."""
    _, table = read_pools()
    model, count = host_gpus(listing)
    return [
        f's/"{old}"/"{new}"/'
        for old, new in sorted(served_pools(model, count, table).items())
        if old != new
    ]


def tag_filter(listing: str) -> str:
    """Tags of the GPU variants this host cannot serve, negated (their actions would wait for a
    pool with no worker); every variant of 2+ GPUs is tagged with its own name."""
    _, count = host_gpus(listing)
    variants = table()["VARIANTS"]
    too_big = [name for name, spec in variants.items() if spec["gpus"] > count]
    for name in too_big:
        if name not in variants[name]["tags"]:
            raise HostError(f"variant {name} has no tag of its own name: cannot filter it")
    return ",".join(f"-{name}" for name in too_big)


def _listing(path: str | None) -> str:
    path = path or os.environ.get("RIG_GPU_LISTING")
    if path:
        with open(path) as f:
            return f.read()
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise HostError("no nvidia-smi on PATH: this host can serve no GPU pool")
    return subprocess.run([smi, "-L"], capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["workers", "pools", "retarget", "tag-filter"])
    parser.add_argument(
        "--listing", help="a saved `nvidia-smi -L` (default: $RIG_GPU_LISTING, else nvidia-smi's)"
    )
    parser.add_argument("--dev", default="/dev", help="where the NVIDIA device nodes are")
    args = parser.parse_args()
    try:
        listing = _listing(args.listing)
        if args.what == "workers":
            lines = workers(listing, os.cpu_count() or 2, args.dev)
        elif args.what == "pools":
            lines = [" ".join(pools(listing))]
        elif args.what == "retarget":
            lines = retarget(listing)
        else:
            lines = [tag_filter(listing)]
    except HostError as error:
        sys.exit(f"host_pools: {error}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
