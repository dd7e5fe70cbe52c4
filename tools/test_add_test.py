"""tools/add_test.py: runs as the README says, and its stanza is what collection measured.

Collects in this test's own interpreter (@pypi's, as tools/add_test.py does through Bazel):
deps come from the modules collection loaded, every label exists, torch's decorators place
the cases, skips become expectations entries, and files that cannot be collected or define
tests nothing collects are said so.
"""

import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tools import add_test, add_test_deps

FIXTURES = add_test.ROOT / "upstream_style_tests"


def _environment() -> add_test.Environment:
    site = pathlib.Path(importlib.util.find_spec("torch").origin).parents[1]
    manifest = json.loads((site.parent / "manifest.json").read_text())
    return add_test.Environment(sys.executable, None, manifest, "this test's interpreter")


def _existing(label: str, manifest: dict) -> bool:
    if label.startswith(add_test_deps.PYPI):
        return label[len(add_test_deps.PYPI) :] in manifest["packages"]
    package = label[2:].partition(":")[0]
    builds = add_test_deps.BuildFiles(add_test.ROOT)
    return label in builds.libraries(package)


def _deps(path: pathlib.Path) -> list[str]:
    env = _environment()
    labels = add_test_deps.labels_for(
        add_test.collect(path, env, run=False), path, add_test.ROOT, env.manifest
    ).labels
    assert all(_existing(label, env.manifest) for label in labels), labels
    return labels


def test_runs_as_a_script_from_any_directory():
    # No arguments: the usage text, after every import the script needs has worked.
    out = subprocess.run(
        [sys.executable, str(add_test.ROOT / "tools" / "add_test.py")],
        cwd="/",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "ModuleNotFoundError" not in out.stderr, out.stderr
    assert "Prints the torch_test stanza" in out.stderr


def test_reaching_common_utils_through_dynamo_means_torch_testing():
    labels = _deps(FIXTURES / "test_upstream_dynamo_case.py")
    assert "//test_utils:torch_testing" in labels
    assert "@pypi//:functorch" not in labels  # functorch ships inside torch
    assert "@pypi//:torch" not in labels  # torch_testing brings it


def test_torchrec_comes_with_its_locked_requirements():
    labels = _deps(FIXTURES / "test_upstream_torchrec.py")
    assert {"@pypi//:torchrec", "@pypi//:fbgemm-gpu-cpu"} <= set(labels)


def test_a_guarded_import_that_did_not_run_is_no_dep():
    labels = _deps(FIXTURES / "test_upstream_guarded_triton.py")
    assert not [label for label in labels if "triton" in label]


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
    placed = add_test.collect(path, _environment(), run=False)["placed"]
    printed = add_test.stanza(path, placed, ["//test_utils:torch_testing"])
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
    listing = add_test.placement(placed)
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
    env = _environment()
    text, status = add_test.report(path, add_test.collect(path, env, run=True), env, ran=True)
    assert status == 0
    assert "DEFINES TESTS NOTHING COLLECTS" in text and "TestLost (1 test methods)" in text
    assert 'expectations = "test_skips.expectations.toml"' in text
    assert 'test = "test_skips.py::TestSkips::test_widget"' in text
    assert 'match = "needs\\\\ a\\\\ widget\\\\ \\\\(none\\\\ here\\\\)"' in text


def test_a_file_that_cannot_be_collected_here_is_said_so(tmp_path):
    path = tmp_path / "test_needs_accelerator.py"
    path.write_text("import torch\nKIND = torch.accelerator.current_accelerator().type\n")
    env = _environment()
    text, status = add_test.report(path, add_test.collect(path, env, run=False), env, ran=False)
    assert status == 1
    assert "CANNOT BE COLLECTED ON THIS HOST" in text and "AttributeError" in text


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
