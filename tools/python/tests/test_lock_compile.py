"""tools/python/update_lock.sh against the package index: a lock edit keeps every other pin.

Runs outside Bazel (tests have no network; resolving needs the index), on a copy of
tools/python and third_party/python, so the workspace's lock is never touched:
    python3 -m pytest tools/python/tests/test_lock_compile.py
"""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tools.python import lock  # noqa: E402


@pytest.fixture
def tree(tmp_path):
    for part in ("tools/python", "third_party/python"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("tests"))
    return tmp_path


def update_lock(tree, *args) -> str:
    script = tree / "tools" / "python" / "update_lock.sh"
    result = subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def pins(tree) -> dict[str, str]:
    return lock.versions(tree / "third_party" / "python" / "requirements.lock")


def test_adding_a_package_keeps_every_other_pin(tree):
    before = pins(tree)
    with (tree / "third_party" / "python" / "requirements.in").open("a") as f:
        f.write("six\n")
    out = update_lock(tree)
    after = pins(tree)
    assert "six" in after and "six" not in before
    moved = {n: (v, after.get(n)) for n, v in before.items() if after.get(n) != v}
    assert moved == {}, f"unrelated pins moved: {moved}"
    assert set(after) - set(before) == {"six"}
    assert f"+ six {after['six']}" in out.splitlines()


def test_nothing_edited_rewrites_the_same_lock(tree):
    path = tree / "third_party" / "python" / "requirements.lock"
    text = path.read_text()
    assert "no pin changed" in update_lock(tree)
    assert path.read_text() == text


def test_upgrade_moves_only_that_package(tree):
    before = pins(tree)
    out = update_lock(tree, "--upgrade", "tqdm==4.66.0")
    after = pins(tree)
    assert after["tqdm"] == "4.66.0"
    assert {n: v for n, v in after.items() if n != "tqdm"} == {
        n: v for n, v in before.items() if n != "tqdm"
    }
    assert f"~ tqdm {before['tqdm']} -> 4.66.0" in out.splitlines()
