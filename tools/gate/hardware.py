"""A host's hardware fingerprint for the gate: what a GPU-pool change changes.

    hardware.fingerprint(python)   # {"gpu_model", "gpu_count", "gpus", "driver", "cuda_driver",
                                   #  "torch", "torch_cuda", "nccl", "interconnect", "topology"}

GPUs, driver and the CUDA version the driver supports come from nvidia-smi (tools/hardware/probe),
the interconnect from `nvidia-smi topo -m` (the GPU-to-GPU cells: NV# = NVLink with # links,
PIX/PXB/PHB/NODE/SYS = PCIe paths), torch's build and NCCL from `python` (the interpreter the
tests ran on; importing torch takes seconds, once). A host without nvidia-smi has no GPUs.
"""

import json
import re
import subprocess

from tools.hardware import probe

# Runs with the tests' interpreter: torch's build and the NCCL it ships (None on CPU builds).
_TORCH = r"""
import json
info = {"torch": None, "torch_cuda": None, "nccl": None}
try:
    import torch
    info.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
    try:
        nccl = torch.cuda.nccl.version()
        info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        pass
except ImportError:
    pass
print(json.dumps(info))
"""


def ask(python, script: str, timeout: float, env=None):
    """What `python -c script` prints as JSON on its last line, or None if it cannot say."""
    try:
        out = subprocess.run(
            [str(python), "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def torch_build(python, env=None) -> dict:
    return ask(python, _TORCH, 300, env) or {"torch": None, "torch_cuda": None, "nccl": None}


def interconnect(topology: str) -> str:
    """The GPU-to-GPU links of `nvidia-smi topo -m`, e.g. "NV18" or "NV18, SYS"; "" for <2 GPUs."""
    rows = [line.split() for line in topology.splitlines() if re.match(r"GPU\d+\s", line)]
    gpus = len(rows)
    links = {cell for row in rows for cell in row[1 : gpus + 1] if cell != "X"}
    return ", ".join(sorted(links))


def fingerprint(python=None, env=None) -> dict:
    listing = probe.nvidia_smi("--query-gpu=name,driver_version", "--format=csv,noheader") or ""
    gpus = [line.strip() for line in listing.splitlines() if line.strip()]
    header = probe.nvidia_smi() or ""
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    topology = (probe.nvidia_smi("topo", "-m") or "").strip() if len(gpus) > 1 else ""
    info = {
        "gpu_model": ", ".join(sorted({g.split(",")[0].strip() for g in gpus})) or None,
        "gpu_count": len(gpus),
        "gpus": gpus,
        "driver": ", ".join(sorted({g.split(",")[-1].strip() for g in gpus})) or None,
        "cuda_driver": cuda.group(1) if cuda else None,
        "interconnect": interconnect(topology) or None,
        "topology": topology,
    }
    info.update(torch_build(python, env) if python else {})
    return info
