"""tools/add_test.py: runs as the README says, and its stanza is what collection measured.

Collects in this test's own interpreter (@pypi's, as tools/add_test.py does through Bazel):
torch's decorators place the cases, skips become expectations entries, and files that cannot
be collected or define tests nothing collects are said so. Deps: tools/test_add_test_deps.py.
"""

import subprocess
import sys
import textwrap

import pytest

from tools.addtest import environment, file_mode, measure, stanza


def test_runs_as_a_script_from_any_directory():
    # No arguments: the usage text, after every import the script needs has worked. `-S`: no
    # site packages, as on a fresh host's python3 (no pip, no packaging), where it starts.
    out = subprocess.run(
        [sys.executable, "-S", str(environment.ROOT / "tools" / "add_test.py")],
        cwd="/",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "ModuleNotFoundError" not in out.stderr, out.stderr
    assert "Prints the torch_test stanza" in out.stderr


UPSTREAM_STYLE = """
import torch
from torch.testing._internal.common_distributed import (
    MultiProcessTestCase, requires_nccl, skip_if_lt_x_gpu,
)
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.triton_utils import requires_cuda_and_triton


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


def test_stanza_places_upstream_decorators(tmp_path):
    path = tmp_path / "test_from_upstream.py"
    path.write_text(UPSTREAM_STYLE)
    placed = measure.collect(path, environment.Environment.of_this_interpreter(), run=False)[
        "placed"
    ]
    printed = stanza.stanza(path, placed, ["//test_utils:torch_testing"])
    assert printed == textwrap.dedent("""\
        torch_test(
            name = "test_from_upstream",
            nccl = ["multi_gpu"],
            triton = ["gpu"],
            variants = [
                "cpu",
                "gpu",
                "multi_gpu",
            ],
            deps = ["//test_utils:torch_testing"],
        )""")
    listing = file_mode.placement(placed)
    assert "# gpu: 1 cases\n#   test_from_upstream.py::TestCompiled::test_triton" in listing


def test_measured_skips_and_lost_classes_are_reported(tmp_path):
    path = tmp_path / "test_skips.py"
    path.write_text(
        textwrap.dedent("""\
        import unittest


        def as_function(cls):  # as a class-level decorator that wraps in a function does
            def wrapper(*args):
                return cls(*args)
            return wrapper


        class TestSkips(unittest.TestCase):
            @unittest.skip("needs a widget (none here)")
            def test_widget(self):
                pass


        @as_function
        class TestLost(unittest.TestCase):
            def test_never_collected(self):
                pass
        """)
    )
    env = environment.Environment.of_this_interpreter()
    text, status = file_mode.report(path, measure.collect(path, env, run=True), env, ran=True)
    assert status == 0
    assert "DEFINES TESTS NOTHING COLLECTS" in text and "TestLost (1 test methods)" in text
    assert 'expectations = "test_skips.expectations.toml"' in text
    assert 'test = "test_skips.py::TestSkips::test_widget"' in text
    assert 'match = "needs a widget (none here)"' in text


GPU_ONLY = """
import unittest

from test_utils.hardware import requires_gpus


class TestOnGpu(unittest.TestCase):
    @requires_gpus(1)
    def test_gpu_fails_here(self):
        raise ValueError("the gpu variant's case fails on this host")

    @requires_gpus(1)
    @unittest.skip("needs a gpu widget (none here)")
    def test_gpu_skips(self):
        pass

    def test_on_cpu(self):
        pass
"""


def test_a_gpu_hosts_gpu_cases_are_measured_and_proposed_for_their_variant(tmp_path):
    path = tmp_path / "test_gpu_only.py"
    path.write_text(GPU_ONLY)
    env = environment.Environment.of_this_interpreter()
    result = measure.collect(path, env, run=True)
    # Without GPUs: the cpu case alone runs, and nothing is proposed for the gpu ones.
    text, _ = file_mode.report(path, result, env, ran=True)
    assert "# 2 GPU-variant cases not run on this host" in text
    assert "[[expect]]" not in text

    # On a host of one GPU (as told; these cases need none), the gpu variant's own child runs
    # its cases, and each outcome is proposed for that variant alone.
    measure.measure_gpu_variants(path, env, result, host_gpus=1)
    text, status = file_mode.report(path, result, env, ran=True)
    assert status == 0
    assert "GPU-variant cases not run" not in text
    assert "# Measured on this host, gpu cases: 1 skipped, 1 failed" in text
    entries = {e["test"]: e for e in stanza.proposals(path, result).entries}
    assert entries == {
        "test_gpu_only.py::TestOnGpu::test_gpu_skips": {
            "test": "test_gpu_only.py::TestOnGpu::test_gpu_skips",
            "outcome": "skip",
            "reason": "needs a gpu widget (none here)",
            "match": "needs a gpu widget (none here)",
            "variants": ["gpu"],
        },
        "test_gpu_only.py::TestOnGpu::test_gpu_fails_here": {
            "test": "test_gpu_only.py::TestOnGpu::test_gpu_fails_here",
            "outcome": "fail",
            "reason": "fails on this torch as measured by add_test",
            "match": "ValueError: the gpu variant's case fails on this host",
            "variants": ["gpu"],
            "proposed": True,
        },
    }
    assert 'expectations = "test_gpu_only.expectations.toml"' in text


def test_a_gpu_variants_abnormal_run_is_said_and_its_file_runs_alone():
    placed = {"test_x.py::test_cpu": ["cpu", []], "test_x.py::test_gpu": ["gpu", []]}
    result = {"placed": placed, "exit": 0, "pytest_args": []}
    assert stanza.crash_notes(result) == [] and not stanza.runs_alone(result)
    # The gpu variant's run ended with a signal's status after its first case.
    result["gpu_runs"] = {"gpu": {"placed": placed, "exit": 139, "started": 1, "pytest_args": []}}
    (note,) = stanza.crash_notes(result)
    assert note.startswith("the gpu cases' run: PYTEST ENDED ABNORMALLY (exit status 139)")
    assert stanza.runs_alone(result)
    # Its run crashed pytest and ran to its end with Python's tracebacks: the stanza passes them.
    result["gpu_runs"]["gpu"].update(
        exit=1,
        started=1,
        pytest_args=["--tb=native"],
        crashed_with_defaults={"started": 0, "exit": 3},
    )
    assert stanza.stanza_args(result) == ["--tb=native"] and stanza.runs_alone(result)


def test_a_file_that_cannot_be_collected_here_is_said_so(tmp_path):
    path = tmp_path / "test_needs_accelerator.py"
    # A GPU at import: no build of torch has one where the cpu variant hides them (a CPU build
    # raises AssertionError, a CUDA build with no visible device RuntimeError).
    path.write_text("import torch\nDEVICE = torch.cuda.current_device()\n")
    env = environment.Environment.of_this_interpreter()
    text, status = file_mode.report(path, measure.collect(path, env, run=False), env, ran=False)
    assert status == 1
    assert "CANNOT BE COLLECTED ON THIS HOST" in text
    assert "AssertionError" in text or "RuntimeError" in text, text


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
