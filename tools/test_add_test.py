"""tools/add_test.py: the stanza it prints places an upstream-style file's tests as the
targets will (torch's decorators read by the plugin) and names what the file imports."""

import textwrap

from tools import add_test

UPSTREAM_STYLE = """
import torch
import numpy as np
from torch.testing._internal.common_distributed import (
    MultiProcessTestCase, requires_nccl, skip_if_lt_x_gpu,
)
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.triton_utils import requires_cuda_and_triton
from test_utils.numerics import assert_close


class TestOnCpu(TestCase):
    def test_cpu(self):
        pass


class TestCompiled(TestCase):
    @requires_cuda_and_triton
    def test_triton(self):
        pass


class TestRanks(MultiProcessTestCase):
    @requires_nccl()
    @skip_if_lt_x_gpu(2)
    def test_nccl(self):
        pass
"""


def test_deps_follow_imports():
    assert add_test.deps_of(UPSTREAM_STYLE) == [
        "//test_utils:numerics",
        "//test_utils:torch_testing",
        "@pypi//:numpy",
    ]


def test_stanza_places_upstream_decorators(tmp_path):
    path = tmp_path / "test_from_upstream.py"
    path.write_text(UPSTREAM_STYLE.replace("from test_utils.numerics import assert_close\n", ""))
    printed = add_test.stanza(path, add_test._collect(path), ["//test_utils:torch_testing"])
    assert printed == textwrap.dedent("""\
        torch_test(
            name = "test_from_upstream",
            variants = [
                "cpu",
                "gpu",
                "multi_gpu",
            ],
            nccl = ["multi_gpu"],
            triton = ["gpu"],
            deps = ["//test_utils:torch_testing"],
        )""")
