"""The caches a test process shares with this user's other tests on the host, set up by the
runner: inductor's and triton's kernels (tools/runner/process/kernel_cache.py) and the vector-ISA
memo
(tools/runner/process/vec_isa_memo.py). Both live in /tmp and must be this user's alone
(tools/runner/process/private_dirs.py): one that is not fails the target before any test runs, with
the reason and the fix, rather than leaving each process to fall back in silence.
"""

from tools.runner.process import kernel_cache, private_dirs, vec_isa_memo


def configure(env) -> None:
    """Sets the kernel caches' folders in `env` (unless set); exits if a folder is refused."""
    try:
        kernel_cache.configure(env)
        vec_isa_memo.ensure_private(env)
    except private_dirs.NotPrivate as error:
        raise SystemExit(f"torch_test: {error}") from None
