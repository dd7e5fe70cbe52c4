"""DTensor test base: one rank per device, and a 1-D mesh over all of them.

    class MyTest(DTensorTestCase):
        @with_comms
        def test_shard(self):
            mesh = self.build_device_mesh()
            ...  # runs in every rank

CPU runs 4 gloo ranks; CUDA runs one NCCL rank per visible GPU, at most 4.
"""

import functools

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from test_utils.multiprocess_testcase import MultiProcessTestCase, per_rank
from tools.hardware import probe

MAX_WORLD_SIZE = 4


class DTensorTestCase(MultiProcessTestCase):
    @property
    def world_size(self) -> int:
        if self.device_type == "cuda":
            return min(MAX_WORLD_SIZE, _visible_gpus())
        return MAX_WORLD_SIZE

    def build_device_mesh(self) -> DeviceMesh:
        """A 1-D mesh over all ranks, on the default process group."""
        return init_device_mesh(self.device_type, (self.world_size,))


@functools.cache
def _visible_gpus() -> int:
    # Asked in the pytest process and again in every rank; nvidia-smi once per process is enough.
    return probe.visible_gpu_count()


# The name torch's own DTensor tests use.
with_comms = per_rank
