"""Caches in shared places are their user's alone (tools/runner/process/private_dirs.py):
created 0700;
a folder another user made, one others may use, a link, or one in a parent others may change
is refused with the reason, and its entries are never read (the vec-ISA memo, the runner's
kernel caches).
"""

import os
import pathlib
import types

import pytest

from tools.runner import shared_caches
from tools.runner.process import kernel_cache, private_dirs, vec_isa_memo

NOBODY = 65534


class _RejectedProbe:
    """A stand-in for inductor's VecISA whose probe this host's compiler rejects."""

    calls = 0

    def check_build(self, code: str) -> bool:
        type(self).calls += 1
        return False

    def build_arch_flags(self) -> str:
        return "-mavx2"

    def build_macro(self) -> list[str]:
        return ["CPU_CAPABILITY_AVX2"]

    def __str__(self) -> str:
        return "avx2"


def _foreign(path: pathlib.Path, monkeypatch) -> None:
    """Makes `path` another user's: chown to nobody where this process may (root outside a
    sandbox), else (Bazel's sandbox maps no other uid) this process another uid."""
    try:
        os.chown(path, NOBODY, NOBODY)
    except OSError:
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)


def test_a_new_folder_and_its_missing_parents_are_created_private(tmp_path):
    made = private_dirs.ensure(tmp_path / "parent" / "cache")
    assert made == tmp_path / "parent" / "cache"
    for folder in (made, made.parent):
        assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.getuid()
    assert private_dirs.ensure(made) == made  # and taken as it is next time


def test_a_folder_others_may_enter_is_refused(tmp_path):
    shared = tmp_path / "cache"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(private_dirs.NotPrivate, match="mode is 0777"):
        private_dirs.ensure(shared)
    shared.chmod(0o755)  # readable by others is refused too: the rule is 0700
    with pytest.raises(private_dirs.NotPrivate, match="mode is 0755"):
        private_dirs.ensure(shared)


def test_a_folder_another_user_made_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "cache"
    theirs.mkdir(mode=0o700)
    _foreign(theirs, monkeypatch)
    with pytest.raises(private_dirs.NotPrivate, match="belongs to uid"):
        private_dirs.ensure(theirs)


def test_a_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(target)
    with pytest.raises(private_dirs.NotPrivate, match="not a directory"):
        private_dirs.ensure(tmp_path / "cache")


def test_a_folder_in_a_parent_others_may_change_is_refused(tmp_path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)  # not sticky: anyone may swap our folder for theirs
    with pytest.raises(private_dirs.NotPrivate, match="not sticky"):
        private_dirs.ensure(parent / "cache")
    parent.chmod(0o1777)  # sticky, as /tmp: only the owner may rename the folder
    assert private_dirs.ensure(parent / "cache")


def test_forged_vec_isa_passes_in_another_users_folder_are_never_read(tmp_path, monkeypatch):
    monkeypatch.setattr(vec_isa_memo, "taken", [])
    monkeypatch.setattr(vec_isa_memo, "checked", [])
    monkeypatch.setattr(vec_isa_memo, "refused", [])
    isa = _RejectedProbe()
    forged = tmp_path / "memo"
    forged.mkdir()
    facts = vec_isa_memo.probe_facts(isa, "int main() {}")
    (forged / vec_isa_memo.digest(facts)).write_text("{}")  # a pass, as if kept
    forged.chmod(0o777)
    _foreign(forged, monkeypatch)
    vec_isa_memo.install(types.SimpleNamespace(VecISA=_RejectedProbe), forged)
    assert not isa.check_build("int main() {}")
    assert _RejectedProbe.calls == 1
    assert "refusing the cache folder" in vec_isa_memo.summary()
    monkeypatch.setenv("TORCH_TEST_VEC_ISA_MEMO", str(forged))
    with pytest.raises(private_dirs.NotPrivate):
        vec_isa_memo.ensure_private()


def test_the_runner_refuses_a_kernel_cache_folder_others_made(tmp_path, monkeypatch):
    forged = tmp_path / "kernels"
    forged.mkdir(mode=0o777)
    forged.chmod(0o777)
    _foreign(forged, monkeypatch)
    monkeypatch.setattr(kernel_cache, "ROOT", forged)
    env = {"PATH": os.environ["PATH"], "TORCH_TEST_VEC_ISA_MEMO": str(tmp_path / "memo")}
    with pytest.raises(SystemExit, match=f"torch_test: refusing the cache folder {forged}"):
        shared_caches.configure(env)
    assert "TORCHINDUCTOR_CACHE_DIR" not in env


def test_the_runner_refuses_a_vec_isa_memo_folder_others_made(tmp_path, monkeypatch):
    forged = tmp_path / "memo"
    forged.mkdir(mode=0o700)
    monkeypatch.setattr(kernel_cache, "ROOT", tmp_path / "kernels")
    forged.chmod(0o777)
    env = {"PATH": os.environ["PATH"], "TORCH_TEST_VEC_ISA_MEMO": str(forged)}
    with pytest.raises(SystemExit, match=f"refusing the cache folder {forged}"):
        shared_caches.configure(env)
