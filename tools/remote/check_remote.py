"""The computations tools/remote/check_remote.sh needs, by name (it runs them as
`python3 -m tools.remote.check_remote NAME ARGS...`, which prints the result's lines):

    cpu_pool                   POOL_KEY and the cpu variant's pool, on one line
    gpu_variants               "SUFFIX POOL" of every GPU variant (tools/build_defs/variants.bzl)
    most_gpus                  the widest variant's GPU count
    executions WORKER_LOG      the worker's "executed" records as "TARGET POOL PROGRAM" lines
    update_result ADDR TOKEN   UpdateActionResult of a made-up action: "accepted" or
                               "refused CODE" (needs grpc and buildgrid: run it with the rig's
                               venv python)
    seed_pypi OUTPUT_BASE      gives a new output base the workspace's fetched @pypi (hard
                               links, tools/selftest/harness.py): a fetch of its own costs
                               minutes and checks nothing here

Test results are not read here: tools/results/outcomes.py judges them.
"""

import hashlib
import json
import os
import pathlib
import sys

from tools.hardware.table import table
from tools.remote.pools import read_pools


def seed_pypi(output_base: str) -> list[str]:
    from tools.selftest import harness

    return [harness.seed_pypi(harness.workspace_output_base(), pathlib.Path(output_base))]


def cpu_pool() -> list[str]:
    key, pools = read_pools()
    return [f"{key} {pools['cpu']}"]


def gpu_variants() -> list[str]:
    return [f"{s['suffix']} {s['pool']}" for s in table()["VARIANTS"].values() if s["gpus"]]


def most_gpus() -> list[str]:
    return [str(max(spec["gpus"] for spec in table()["VARIANTS"].values()))]


def executions(log: str) -> list[str]:
    """From the worker's log (tools/remote/worker/bots.py logs `executed {json}` per action);
    none when there is no log yet."""
    path = pathlib.Path(log)
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if " executed {" in line:
            record = json.loads(line.split(" executed ", 1)[1])
            pool = ",".join(f"{k}={v}" for k, v in record["pool"].items()) or "(no pool)"
            found.append(f"{record['target']} {pool} {record.get('program', '?')}")
    return found


def update_result(address: str, token: str = "") -> list[str]:
    """Whether the action cache at ADDRESS takes a result with TOKEN (none if empty)."""
    import grpc  # the rig's venv only
    from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
    from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2_grpc import (
        ActionCacheStub,
    )

    blob = os.urandom(16)
    request = re_pb2.UpdateActionResultRequest(
        instance_name=os.environ["RIG_INSTANCE"],
        action_digest=re_pb2.Digest(hash=hashlib.sha256(blob).hexdigest(), size_bytes=len(blob)),
        action_result=re_pb2.ActionResult(exit_code=0),
    )
    metadata = [("authorization", f"Bearer {token}")] if token else []
    try:
        stub = ActionCacheStub(grpc.insecure_channel(address))
        stub.UpdateActionResult(request, metadata=metadata, timeout=30)
        return ["accepted"]
    except grpc.RpcError as error:
        return [f"refused {error.code().name}"]


COMMANDS = {
    f.__name__: f for f in (cpu_pool, gpu_variants, most_gpus, executions, update_result, seed_pypi)
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python3 -m tools.remote.check_remote {{{','.join(COMMANDS)}}} ARGS...")
        return 2
    for line in COMMANDS[argv[0]](*argv[1:]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
