"""tools/python/host_mode.py gives Python tools the mode tools/bazel picks, rule and all: a copy
of tools/bazel in a scratch root decides, so a change to its rule reaches the Python side too.

Runs outside Bazel (it runs tools/bazel): `python3 -m tools.selftest plumbing`.
"""

import os
import pathlib
import shutil

import pytest

from tools.python import host_mode

ROOT = pathlib.Path(__file__).resolve().parents[3]
SETUP_FILE = ".torch_test_host_python"  # where `tools/bazel setup` writes the mode


@pytest.fixture
def root(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "bazel", tmp_path / "tools" / "bazel")
    shutil.copy(ROOT / ".bazelversion", tmp_path / ".bazelversion")
    return tmp_path


def env(**chosen):
    plain = {k: v for k, v in os.environ.items() if k != "TORCH_TEST_PYTHON"}
    return {**plain, **chosen}


def test_pinned_without_a_setup_or_a_variable(root):
    assert host_mode.host_python(env(), root) is None


def test_the_setup_file_sets_host_mode(root):
    (root / SETUP_FILE).write_text("/opt/image/bin/python3\n")
    assert host_mode.host_python(env(), root) == "/opt/image/bin/python3"


@pytest.mark.parametrize("chosen", ["pinned", ""])
def test_the_variable_chooses_pinned_over_the_file(root, chosen):
    (root / SETUP_FILE).write_text("/opt/image/bin/python3\n")
    assert host_mode.host_python(env(TORCH_TEST_PYTHON=chosen), root) is None


def test_the_variable_names_another_interpreter(root):
    (root / SETUP_FILE).write_text("/opt/image/bin/python3\n")
    chosen = env(TORCH_TEST_PYTHON="/venv/bin/python3")
    assert host_mode.host_python(chosen, root) == "/venv/bin/python3"


def test_the_rule_is_tools_bazels(root):
    # Another word for pinned in tools/bazel alone: the Python side follows it.
    wrapper = root / "tools" / "bazel"
    text = wrapper.read_text()
    assert "readonly pinned_word=pinned\n" in text
    wrapper.write_text(text.replace("readonly pinned_word=pinned\n", "readonly pinned_word=lock\n"))
    assert host_mode.host_python(env(TORCH_TEST_PYTHON="lock"), root) is None
    assert host_mode.host_python(env(TORCH_TEST_PYTHON="pinned"), root) == "pinned"
