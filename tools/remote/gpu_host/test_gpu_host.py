"""What the GPU-host profile of the rig adds, checked without a GPU: the pools a host serves
from its `nvidia-smi -L`, the workers it starts, what a GPU action's sandbox is given of /dev,
and the run table's reading of the workers' `executed` lines."""

import datetime
import json
import stat
import sys

import pytest

from tools.remote.gpu_host import host_pools, remote_table
from tools.remote.worker import sandbox


def _listing(*names: str) -> str:
    return "".join(f"GPU {i}: {n} (UUID: GPU-{i:04d})\n" for i, n in enumerate(names))


H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


def test_model_and_count_from_nvidia_smi():
    assert host_pools.host_gpus(_listing(H100, H100)) == ("h100", 2)
    assert host_pools.host_gpus(_listing(*[H200] * 4)) == ("h200", 4)


def test_a_host_without_gpus_or_with_two_models_serves_nothing():
    with pytest.raises(host_pools.HostError, match="no GPU"):
        host_pools.host_gpus("No devices were found\n")
    with pytest.raises(host_pools.HostError, match="several models"):
        host_pools.host_gpus(_listing(H100, H200))


def test_a_host_serves_the_pools_up_to_its_gpu_count_under_its_model():
    table = {"cpu": "cpu", "gpu": "gpu-h200-x1", "multi_gpu": "gpu-h200-x2", "x4": "gpu-h200-x4"}
    assert host_pools.served_pools("h100", 2, table) == {
        "gpu-h200-x1": "gpu-h100-x1",
        "gpu-h200-x2": "gpu-h100-x2",
    }
    assert host_pools.served_pools("h200", 4, table) == {p: p for p in list(table.values())[1:]}


def test_workers_of_a_two_gpu_h100_host():
    cpu, gpu = host_pools.workers(_listing(H100, H100), cores=32)
    assert cpu == "cpu 16 --property=Pool=cpu"
    assert (
        gpu
        == "gpu-h100 16 --gpu-devices=/dev --property=Pool=gpu-h100-x1 --property=Pool=gpu-h100-x2"
    )
    # at least two actions per GPU on a host with few cores
    assert host_pools.workers(_listing(*[H200] * 4), cores=4)[1].split()[1] == "8"


def test_retarget_renames_only_what_differs_and_filters_what_the_host_lacks():
    assert host_pools.pools(_listing(H100, H100)) == ["gpu-h100-x1", "gpu-h100-x2"]
    assert host_pools.retarget(_listing(*[H200] * 4)) == []
    assert host_pools.retarget(_listing(H100)) == ['s/"gpu-h200-x1"/"gpu-h100-x1"/']
    assert host_pools.tag_filter(_listing(H100)) == "-multi_gpu,-gpu_x4,-gpu_x8"
    assert host_pools.tag_filter(_listing(*[H200] * 8)) == ""


def test_gpu_sandbox_gets_the_nvidia_nodes_and_the_shared_lease_folder(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null", "sda"):
        (dev / name).touch()  # gpu_exposure goes by name; mknod needs a capability
    (dev / "nvidia-caps").mkdir()
    lease = tmp_path / "lease"
    args = sandbox.gpu_exposure(dev, str(lease))
    binds = [tuple(args[i + 1 : i + 3]) for i, a in enumerate(args) if a == "--dev-bind"]
    assert binds == [
        (str(dev / n), f"/dev/{n}")
        for n in ("nvidia-caps", "nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl")
    ]
    assert args[-6:] == [
        "--bind",
        str(lease),
        str(lease),
        "--setenv",
        "TORCH_TEST_GPU_LEASE_DIR",
        str(lease),
    ]
    assert stat.S_IMODE(lease.stat().st_mode) == 0o777


def test_gpu_sandbox_refuses_a_host_without_nvidia_nodes(tmp_path):
    with pytest.raises(SystemExit, match="no .*nvidia"):
        sandbox.gpu_exposure(tmp_path, str(tmp_path / "lease"))


def test_executed_lines_since_the_run_began_and_overlap(tmp_path):
    def line(stamp, **record):
        return f"{stamp} worker[gpu-h100] executed {json.dumps(record)}\n"

    log = tmp_path / "worker-gpu-h100.log"
    log.write_text(
        line("2026-01-01 10:00:00,000", target="//a:old", wall_s=5.0)
        + "2026-01-01 10:00:01,000 worker[gpu-h100] session x properties []\n"
        + line("2026-01-01 10:01:00,000", target="//a:x", wall_s=30.0)
        + line("2026-01-01 10:01:10,000", target="//a:y", wall_s=20.0)
        + line("2026-01-01 10:02:00,000", target="//a:z", wall_s=10.0)
    )
    since = datetime.datetime(2026, 1, 1, 10, 0, 30).timestamp()
    records = remote_table.executed_records([log], since)
    assert [r["target"] for r in records] == ["//a:x", "//a:y", "//a:z"]
    assert remote_table.most_at_once(records) == 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
