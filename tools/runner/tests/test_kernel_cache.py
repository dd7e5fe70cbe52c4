"""Inductor's kernels shared across targets and runs (tools/runner/process/kernel_cache.py).

The runner runs a test that compiles a CPU kernel with inductor, each time with torch imported
through another path to the same files, as each Bazel sandbox gives it (…/linux-sandbox/<N>/…),
and in a new TMPDIR, as the runner gives every run in either mode: the second run compiles
nothing, neither a kernel nor inductor's precompiled header (the compiler, a wrapper, logs what
it builds). A compiler that changed at the same path (CXX, a wrapper script edited) compiles
anew. That another torch build never shares a key or a folder is
checked on stand-in torch folders, whose libraries change. A compile stopped midway leaves
nothing where inductor would take it as built (torch's own builder, a compiler killed as it
writes).
"""

import ctypes
import importlib.util
import os
import pathlib
import sys
import time

import pytest

from tools.runner.process import kernel_cache
from tools.runner.tests.runner_subprocess import ONE_VEC_ISA, bazel_env, run_runner, write_tests

COMPILES_ON_THE_CPU = (
    ONE_VEC_ISA
    + """
    import torch

    def test_compiles():
        compiled = torch.compile(lambda x: (x * 3).cos().sum(), backend="inductor")
        x = torch.randn(32)
        torch.testing.assert_close(compiled(x), (x * 3).cos().sum())
"""
)

WRAPPER = '#!/bin/sh\n# {note}\necho "$@" >>{log}\nexec g++ "$@"\n'


def _site_of_torch() -> str:
    # Found, not imported: this process needs only the path (the runner's children import it).
    return os.path.dirname(
        os.path.dirname(os.path.abspath(importlib.util.find_spec("torch").origin))
    )


class _Runs:
    """The runner on one test file and one kernel cache, torch reached through `sandbox`, the
    compiler a wrapper of g++ given as CXX."""

    def __init__(self, tmp_path: pathlib.Path):
        self.tmp_path = tmp_path
        self.test_file = write_tests(tmp_path, COMPILES_ON_THE_CPU)
        self.kernels = tmp_path / "kernels"
        self.site = _site_of_torch()
        self.compiler = tmp_path / "cxx" / "g++-wrapper"
        self.compiler.parent.mkdir()
        self.log = tmp_path / "cxx" / "calls.log"
        self.sources: dict[str, list[str]] = {}  # an output built: the .cpp files it is of
        self.set_compiler("the first compiler")

    def set_compiler(self, note: str) -> None:
        self.compiler.write_text(WRAPPER.format(note=note, log=self.log))
        self.compiler.chmod(0o755)

    def run(self, sandbox: str) -> list[str]:
        """Runs the test; returns the files the compiler built (kernels, headers)."""
        link = self.tmp_path / sandbox / "site"
        if not link.exists():
            link.parent.mkdir()
            link.symlink_to(self.site)
        self.log.write_text("")
        env = bazel_env(
            self.tmp_path,
            TORCHINDUCTOR_CACHE_DIR=self.kernels / "inductor",
            TRITON_CACHE_DIR=self.kernels / "triton",
            TORCH_TEST_VEC_ISA_MEMO=self.tmp_path / "memo",
            CXX=self.compiler,
        )
        # First on the path, as the runfiles' site folder is in a test.
        env["PYTHONPATH"] = os.pathsep.join([str(link), env["PYTHONPATH"]])
        result = run_runner(self.test_file, env, timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return self.built()

    def built(self) -> list[str]:
        """The outputs of the compiler's calls this run, less preprocessing (`-E`, which
        inductor runs in every process to key its header) and version queries (no `-o`)."""
        outputs = []
        for call in self.log.read_text().splitlines():
            words = call.split()
            if "-o" in words and "-E" not in words:
                outputs.append(words[words.index("-o") + 1])
                self.sources[outputs[-1]] = [w for w in words if w.endswith(".cpp")]
        return outputs

    def kernels_of(self, built: list[str]) -> list[str]:
        """The kernels among `built`: .so files, less inductor's ISA probes (their sources
        define a `*_chk_kernel`, torch/_inductor/cpu_vec_isa.py), which a changed compiler
        builds again too, so that a probe alone cannot stand for a kernel."""

        def probe(path: str) -> bool:
            return any("_chk_kernel" in pathlib.Path(cpp).read_text() for cpp in self.sources[path])

        return [path for path in built if path.endswith(".so") and not probe(path)]


def _headers(built: list[str]) -> list[str]:
    return [path for path in built if path.endswith(".gch")]


def test_a_second_run_compiles_nothing_unless_the_compiler_changed(tmp_path):
    runs = _Runs(tmp_path)
    first = runs.run("sandbox_1")
    assert runs.kernels_of(first), "the first run compiled no kernel: nothing is checked"
    assert runs.run("sandbox_2") == [], (
        "another sandbox's run compiled the same kernels or headers again"
    )
    # Same compiler path, same torch path as the run before: only the compiler's content
    # tells the two apart.
    runs.set_compiler("another compiler at the same path")
    third = runs.run("sandbox_2")
    assert runs.kernels_of(third), "kernels of another compiler were reused"
    assert len(_headers(third)) == len(_headers(first)), "headers of another compiler were reused"


def _fake_torch(root: pathlib.Path) -> pathlib.Path:
    torch_dir = root / "torch"
    (torch_dir / "lib").mkdir(parents=True)
    (torch_dir / "__init__.py").write_text("")
    (torch_dir / "version.py").write_text("__version__ = '0.0'\n")
    (torch_dir / "lib" / "libtorch_cpu.so").write_bytes(b"one build")
    return torch_dir


def test_another_torch_build_gets_another_key_and_folder(tmp_path, monkeypatch):
    torch_dir = _fake_torch(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(kernel_cache, "_torch_dir", lambda: str(torch_dir))
    monkeypatch.setattr(kernel_cache, "_compiler_digest", lambda: "cxx")
    command = f"g++ i -I{torch_dir}/include -o o.so -L{torch_dir}/lib"
    env = {"PATH": os.environ["PATH"]}

    def key_and_folder():
        kernel_cache._torch_placeholder.cache_clear()
        return kernel_cache.sandbox_free(command), kernel_cache.build_digest(env)

    first = key_and_folder()
    assert str(torch_dir) not in first[0]
    (torch_dir / "lib" / "libtorch_cpu.so").write_bytes(b"another build")
    second = key_and_folder()
    assert first[0] != second[0] and first[1] != second[1]


def test_text_without_torch_folder_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(kernel_cache, "_torch_dir", lambda: "/sandbox/site/torch")
    assert kernel_cache.sandbox_free("") == ""
    assert kernel_cache.sandbox_free("-O3 -march=native") == "-O3 -march=native"


# Writes part of the file it is asked for, then is killed, as a Bazel TIMEOUT stops a compile.
KILLED_MIDWAY = """#!/bin/sh
out= prev=
for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done
if [ -n "$out" ]; then printf 'half a kernel' >"$out"; kill -9 $$; fi
exec g++ "$@"
"""


def test_a_compile_stopped_midway_leaves_nothing_to_load(tmp_path, monkeypatch):
    from torch._inductor import codecache, cpp_builder

    # install() patches torch's builder and key writer; put them back after this test.
    monkeypatch.setattr(codecache.CppBuilder, "build", codecache.CppBuilder.build)
    monkeypatch.setattr(codecache, "write", codecache.write)
    kernel_cache.install(codecache)
    source = tmp_path / "kernel.cpp"
    source.write_text('extern "C" int answer() { return 42; }\n')
    killed = tmp_path / "killed-g++"
    killed.write_text(KILLED_MIDWAY)
    killed.chmod(0o755)

    def builder(compiler: str):
        return cpp_builder.CppBuilder(
            name="kernel",
            sources=str(source),
            BuildOption=cpp_builder.CppOptions(compiler=compiler),
            output_dir=str(tmp_path / "kernels"),
        )

    stopped = builder(str(killed))
    with pytest.raises(Exception, match="killed-g"):
        stopped.build()
    target = pathlib.Path(stopped.get_target_file_path())
    left = [p.name for p in target.parent.iterdir() if p.is_file()]
    assert left == [], f"a stopped compile left {left} where inductor takes a kernel as built"
    whole = builder("g++")
    whole.build()
    assert ctypes.CDLL(whole.get_target_file_path()).answer() == 42


def test_a_part_left_by_a_killed_process_goes_once_it_is_stale(tmp_path, monkeypatch):
    from torch._inductor import codecache, cpp_builder

    monkeypatch.setattr(codecache.CppBuilder, "build", codecache.CppBuilder.build)
    monkeypatch.setattr(codecache, "write", codecache.write)
    kernel_cache.install(codecache)
    source = tmp_path / "kernel.cpp"
    source.write_text('extern "C" int answer() { return 42; }\n')
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    # What a test process killed before its rename leaves, and one another process is writing.
    stale = kernels / f"{kernel_cache.PARTIAL}1-2-other.so"
    stale.write_bytes(b"half a kernel")
    old = time.time() - kernel_cache.STALE_PARTIAL_S - 60
    os.utime(stale, (old, old))
    writing = kernels / f"{kernel_cache.PARTIAL}3-4-another.so"
    writing.write_bytes(b"a kernel being written")
    built = cpp_builder.CppBuilder(
        name="kernel",
        sources=str(source),
        BuildOption=cpp_builder.CppOptions(compiler="g++"),
        output_dir=str(kernels),
    )
    built.build()
    assert ctypes.CDLL(built.get_target_file_path()).answer() == 42
    assert not stale.exists(), "a part older than any compile was left in the kernels' folder"
    assert writing.exists(), "a part another process may still be writing was removed"
