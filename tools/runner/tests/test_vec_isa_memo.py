"""Inductor's vector-ISA probes kept per host (tools/runner/process/vec_isa_memo.py).

Unit tests patch a stand-in for inductor's VecISA (what the memo keeps, keys and refuses is
its own logic, not torch's). Real inductor compiles on this host's CPU, each costing a process
with torch and, before torch 2.13, a torch import per ISA probed, prove only what needs torch:
- one round trip through the runner: a test process's compile probes every ISA the CPU reports
  and the next test process, asking inductor for its ISA, takes all of them (the plugin installs
  the memo, and no ISA escapes it);
- a kept pass that no longer holds fails the compile, and the same probe without the entry
  passes: both processes probe AVX2 alone (inductor's ISA list cut to it), side by side.
"""

import os
import subprocess
import sys
import textwrap
import types

import pytest

from tools.hardware import envvars
from tools.runner.process import on_import, vec_isa_memo
from tools.runner.tests.runner_subprocess import ONE_VEC_ISA, bazel_env, run_runner, write_tests


class _Probed:
    """A stand-in for inductor's module: one ISA whose check answers `passes` and counts."""

    def __init__(self, passes: bool):
        probed = self
        self.calls = 0

        class VecISA:
            def check_build(self, code: str) -> bool:
                probed.calls += 1
                return passes

            def build_arch_flags(self) -> str:
                return "-mavx2 -mfma"

            def build_macro(self) -> list[str]:
                return ["CPU_CAPABILITY_AVX2"]

            def __str__(self) -> str:
                return "avx2"

        self.module = types.SimpleNamespace(VecISA=VecISA)
        self.isa = VecISA()


@pytest.fixture(autouse=True)
def _fresh_counts(monkeypatch):
    monkeypatch.setattr(vec_isa_memo, "taken", [])
    monkeypatch.setattr(vec_isa_memo, "checked", [])


def test_a_probe_that_passed_is_kept_and_taken_without_probing(tmp_path):
    probed = _Probed(passes=True)
    vec_isa_memo.install(probed.module, tmp_path)
    assert probed.isa.check_build("int main() {}")
    assert probed.isa.check_build("int main() {}")
    assert probed.calls == 1
    assert (vec_isa_memo.taken, vec_isa_memo.checked) == (["avx2"], ["avx2"])
    kept = [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]
    assert len(kept) == 1 and '"-mavx2 -mfma"' in kept[0].read_text()


def test_a_probe_that_failed_is_checked_again(tmp_path):
    probed = _Probed(passes=False)
    vec_isa_memo.install(probed.module, tmp_path)
    assert not probed.isa.check_build("int main() {}")
    assert not probed.isa.check_build("int main() {}")
    assert probed.calls == 2
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]


def test_another_probe_code_or_compiler_binary_is_probed_again(tmp_path, monkeypatch):
    from torch._inductor import cpp_builder

    compiler = tmp_path / "c++"
    compiler.write_text("one compiler")
    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", lambda *args: str(compiler))
    probed = _Probed(passes=True)
    memo = tmp_path / "memo"
    vec_isa_memo.install(probed.module, memo)
    probed.isa.check_build("int main() {}")
    probed.isa.check_build("int main() { return 0; }")
    assert probed.calls == 2
    compiler.write_text("an upgraded compiler")
    probed.isa.check_build("int main() {}")
    assert probed.calls == 3


def test_installing_twice_wraps_once(tmp_path):
    probed = _Probed(passes=True)
    vec_isa_memo.install(probed.module, tmp_path)
    wrapped = probed.module.VecISA.check_build
    vec_isa_memo.install(probed.module, tmp_path)
    assert probed.module.VecISA.check_build is wrapped


def test_an_unwritable_folder_leaves_every_check_to_torch(tmp_path):
    probed = _Probed(passes=True)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    vec_isa_memo.install(probed.module, blocker / "memo")
    assert probed.isa.check_build("int main() {}")
    assert probed.isa.check_build("int main() {}")
    assert probed.calls == 2


def test_off_patches_nothing(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    vec_isa_memo.watch({envvars.VEC_ISA_MEMO: vec_isa_memo.OFF})
    assert not on_import.pending(vec_isa_memo.MODULE)
    assert vec_isa_memo.folder({}) == vec_isa_memo.pathlib.Path(vec_isa_memo.DEFAULT_DIR)


# Inductor's precompiled header off for the round trip's compile: the probes neither build nor
# read it, and building it in a fresh kernel folder costs more g++ time than the one kernel.
NO_PRECOMPILED_HEADER = {"TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0"}

# The first process fills the memo from a real compile (what a test's compile asks for); the
# second asks inductor for its vector ISA, which checks the same list of ISAs, without paying a
# kernel compile.
COMPILES_ON_THE_CPU = (
    ONE_VEC_ISA
    + """
    import torch

    def test_compiles():
        compiled = torch.compile(lambda x: (x * 2).sin().sum(), backend="inductor")
        x = torch.randn(64)
        torch.testing.assert_close(compiled(x), (x * 2).sin().sum())
"""
)
PICKS_A_VECTOR_ISA = (
    ONE_VEC_ISA
    + """
    from torch._inductor import cpu_vec_isa

    def test_picks():
        assert cpu_vec_isa.pick_vec_isa() is not None
"""
)


def test_the_second_test_process_takes_every_probe_from_the_first(tmp_path):
    memo = tmp_path / "memo"
    lines = []
    for run, body in (("first", COMPILES_ON_THE_CPU), ("second", PICKS_A_VECTOR_ISA)):
        test_file = write_tests(tmp_path, body, name=f"test_{run}.py")
        env = bazel_env(
            tmp_path,
            **{envvars.VEC_ISA_MEMO: memo, "TORCHINDUCTOR_CACHE_DIR": tmp_path / run / "kernels"},
            **NO_PRECOMPILED_HEADER,
        )
        result = run_runner(test_file, env, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        lines += [line for line in result.stderr.splitlines() if "vec-isa probes" in line]
    first, second = lines
    checked = int(first.split(", ")[1].split()[0])
    assert checked > 0 and first.startswith("torch_test vec-isa probes: 0 kept"), first
    assert second == f"torch_test vec-isa probes: {checked} kept in {memo}, 0 checked"


# A kept pass for AVX2 with a flag this compiler rejects, as an entry that outlived a compiler
# change would be. Inductor's ISA list is cut to AVX2 (valid_vec_isa_list reads it when first
# asked), so each process probes that one ISA, not every one the CPU reports.
STALE_PASS = """
    import pathlib, sys
    import torch
    from torch._inductor import cpu_vec_isa
    from tools.runner.process import on_import, vec_isa_memo

    memo = pathlib.Path(sys.argv[1])
    vec_isa_memo.install(cpu_vec_isa, memo)
    avx2 = next(isa for isa in cpu_vec_isa.supported_vec_isa_list if str(isa) == "avx2")
    cpu_vec_isa.supported_vec_isa_list[:] = [avx2]
    avx2._arch_flags += " -mtorch-test-no-such-flag"
    if sys.argv[2] == "kept":
        facts = vec_isa_memo.probe_facts(avx2, cpu_vec_isa.VecISA._avx_code)
        memo.mkdir(mode=0o700)  # as the memo makes it (tools/runner/process/private_dirs.py)
        (memo / vec_isa_memo.digest(facts)).write_text("")
    compiled = torch.compile(lambda x: (x + 1).cos().sum(), backend="inductor")
    x = torch.randn(64)
    torch.testing.assert_close(compiled(x), (x + 1).cos().sum())
    print("picked", cpu_vec_isa.pick_vec_isa())
"""


def test_a_kept_pass_that_no_longer_holds_fails_the_compile_never_passes_it(tmp_path):
    script = tmp_path / "stale_pass.py"
    script.write_text(textwrap.dedent(STALE_PASS))
    started = {}
    for entry in ("kept", "absent"):  # independent: both at once
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / entry / "kernels"),
        }
        started[entry] = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / entry / "memo"), entry],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    results = {}
    try:
        for entry, proc in started.items():
            stdout, stderr = proc.communicate(timeout=300)
            results[entry] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in started.values():
            proc.kill()
    kept, absent = results["kept"], results["absent"]
    assert kept.returncode != 0 and "torch-test-no-such-flag" in kept.stderr, kept.stderr[-3000:]
    # torch's own check rejects that probe, so inductor compiles without a vector ISA.
    assert absent.returncode == 0, absent.stderr[-3000:]
    assert "picked avx2" not in absent.stdout, absent.stdout
