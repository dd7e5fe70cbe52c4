"""`pypi_repository`: the pinned Python packages and interpreter, as an external repository.

Two modes, chosen by the environment at fetch time:

* Pinned (default): installs `lock` (exact versions + sha256, see tools/python/update_lock.sh)
  into `site/` with `pip --no-deps --require-hashes`; the package index is the only network.
  .pyc files are compiled deterministically so every fetch, on every machine, yields the same
  bytes and cached test results stay valid. The interpreter is `python3` on PATH (or
  $PYTHON_BIN), wrapped as a venv that cannot see the host's site-packages; a fingerprint of
  its binary and stdlib by content (env_fingerprint.sh --stdlib-only) is a runfile of every
  test, so another Python (a patch release, a patched stdlib module) re-runs them.
* Host interpreter (TORCH_TEST_PYTHON=/path/to/python3, e.g. a GPU image that ships torch):
  that interpreter's own packages are used. A package of the lock it lacks is installed from the
  lock (hashed) if its locked wheel is pure Python (expecttest, pytest plugins); one with
  compiled code becomes an incompatible target, so tests needing it are SKIPPED by Bazel, never
  passed. A
  fingerprint of the environment (package versions, torch's CUDA build, GPUs and driver, and
  tools/python/env_fingerprint.sh's digest of every file's path and content on the
  interpreter's sys.path) is a runfile of every test, so a changed image re-runs them.

Another lock (TORCH_TEST_LOCK=/path/to/requirements.lock, e.g. a candidate for an upgrade gate,
tools/gate/gate.py): installed like the pinned one, instead of `lock`. tools/bazel passes its
path and sha256 as repo_env, so an edit of that file re-creates the repository. Unset, nothing
differs from the pinned default (same files, same cache keys).

Either way the repository has one `py_library` per distribution (`@pypi//:torch`, ...),
`@pypi//:python_toolchain` for `register_toolchains`, and `@pypi//:manifest.json` (mode, the
packages' versions, the missing ones) for tools that need to know what the tests got.
"""

load("//tools/hardware:envvars.bzl", "HOST_ENV")

_GENERATOR = Label("//tools/python:generate_build.py")

# The generator imports the lock module beside it; resolving its label makes an edit of it
# re-create the repository, as an edit of the generator does.
_LOCK_MODULE = Label("//tools/python:lock.py")
_FINGERPRINT = Label("//tools/python:env_fingerprint.sh")
_BYTECODE = Label("//tools/runner:bytecode.py")

def _run(ctx, what, argv, env = {}):
    result = ctx.execute(argv, timeout = 3600, environment = env, quiet = True)
    if result.return_code != 0:
        fail("pypi: {} failed (exit {}):\n{}\n{}".format(
            what,
            result.return_code,
            result.stdout[-4000:],
            result.stderr[-4000:],
        ))
    return result.stdout

def _find_interpreter(ctx, python, resolve):
    found = ctx.which(python) if not python.startswith("/") else ctx.path(python)
    if found == None or not found.exists:
        fail("pypi: no Python interpreter {!r} (set PYTHON_BIN or TORCH_TEST_PYTHON)".format(python))
    if not resolve:
        return str(found)  # host mode: keep a venv's own path, its packages are the point

    # Pinned mode: resolve shims (pyenv) to the real executable the venv will point at.
    return _run(ctx, "locating the interpreter", [
        found,
        "-c",
        "import os, sys; print(os.path.realpath(sys.executable))",
    ]).strip()

def _lock(ctx):
    """The lock to install: TORCH_TEST_LOCK if set, else the pinned `lock` attribute."""
    other = ctx.os.environ.get(HOST_ENV["LOCK"], "")
    if not other:
        return ctx.path(ctx.attr.lock)
    path = ctx.path(other)
    if not path.exists:
        fail("pypi: TORCH_TEST_LOCK={} does not exist".format(other))
    return path

def _interpreter_fingerprint(ctx, python):
    """Pinned mode: the digest of the interpreter's binary and stdlib, as tools/bazel passes it.

    tools/bazel passes the same digest as TORCH_TEST_INTERPRETER_FINGERPRINT (which re-runs
    this rule when the interpreter changes); computed here too so a plain bazel-4 call has it.
    """
    argv = ["bash", ctx.path(_FINGERPRINT), python, "--stdlib-only"]
    return _run(ctx, "fingerprinting {}".format(python), argv).strip()

def _compile_host_bytecode(ctx, python):
    """Host mode: bytecode for tests, where the image's torch ships none (tools/runner/bytecode.py).

    Written here, at fetch, into pycache/ beside fingerprint.txt, and nowhere by a test: the
    sandbox mounts the output base read-only for test actions. Re-created with the repository,
    i.e. whenever the environment's fingerprint changes.
    """
    _run(ctx, "compiling bytecode for {}".format(python), [python, "-I", ctx.path(_BYTECODE), "compile", "pycache"])

def _install_lock(ctx, python, lock):
    _run(ctx, "pip install of {}".format(lock), [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
        "--no-compile",
        "--target=site",
        "--requirement={}".format(lock),
    ])

def _pypi_repository_impl(ctx):
    # Every label resolved before any work: Bazel restarts a repository function at the first
    # label it had not resolved, re-running all before it (the lock's pip install, each time).
    for label in (_GENERATOR, _LOCK_MODULE, _FINGERPRINT, _BYTECODE, ctx.attr.lock, ctx.attr.nodeps):
        ctx.path(label)
    host_python = ctx.os.environ.get(HOST_ENV["PYTHON"], "")
    python = _find_interpreter(
        ctx,
        host_python or ctx.os.environ.get("PYTHON_BIN", "python3"),
        resolve = not host_python,
    )
    lock = _lock(ctx)
    extra = []
    if host_python:
        # The same digest tools/bazel passes as TORCH_TEST_ENV_FINGERPRINT (which re-runs this
        # rule when it changes), computed here too so a plain bazel-4 call cannot skip it.
        content = _run(ctx, "fingerprinting {}".format(python), ["bash", ctx.path(_FINGERPRINT), python])
        extra = ["--content-fingerprint={}".format(content.strip())]
        _compile_host_bytecode(ctx, python)
    else:
        _install_lock(ctx, python, lock)
        extra = ["--nodeps={}".format(ctx.path(ctx.attr.nodeps))]
        extra.append("--content-fingerprint={}".format(_interpreter_fingerprint(ctx, python)))
    _run(
        ctx,
        "generating @{} (tools/python/generate_build.py)".format(ctx.name),
        [
            python,
            ctx.path(_GENERATOR),
            "--lock={}".format(lock),
            "--mode={}".format("host" if host_python else "pinned"),
            "--interpreter={}".format(python),
            "--out=.",
        ] + extra,
        # No .pyc from its `import torch` into a host interpreter's site-packages: the host's
        # files are the tests' environment, and the runner decides about bytecode
        # (tools/runner/bytecode.py) by whether torch ships any.
        env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"},
    )

pypi_repository = repository_rule(
    implementation = _pypi_repository_impl,
    attrs = {
        "lock": attr.label(allow_single_file = True, mandatory = True),
        # Lock entries installed without their declared dependencies (not checked for them).
        "nodeps": attr.label(allow_single_file = True, mandatory = True),
    },
    environ = ["PYTHON_BIN"] + [HOST_ENV[k] for k in ("PYTHON", "ENV_FINGERPRINT", "INTERPRETER_FINGERPRINT", "LOCK", "LOCK_SHA256")],
)
