"""The host mode set once per checkout (`tools/bazel setup`), with TORCH_TEST_PYTHON over it:

  1. the setup file is git-ignored (a checkout's choice, never committed)
  2. after `tools/bazel setup --host-python=VENV` a plain `tools/bazel test` runs in host mode on
     VENV (@pypi's manifest and fingerprint say so) and prints the mode on one line
  3. TORCH_TEST_PYTHON=OTHER overrides the file; TORCH_TEST_PYTHON=pinned and an empty
     TORCH_TEST_PYTHON choose the pinned lock over it (the gate's pinned side: tools/gate/sides.py)
  4. `tools/bazel setup --pinned` returns to the pinned lock

Runs in the harness's scratch copy (tools/selftest/harness.py), so the workspace's own mode is
never touched. Cases 3 and 4 read what tools/bazel hands Bazel from a stand-in Bazel
(BAZEL_REAL, which tools/bazel runs in Bazel's place); case 2 is one real `bazel test` of
//tools/selftest:probe_plain on a venv without torch (cheap, as check_host_fingerprint's).
"""

import os
import pathlib
import re
import subprocess
import sys

from tools.hardware import envvars
from tools.selftest.harness import ROOT, Checks, Scratch

SETUP_FILE = ".torch_test_host_python"  # where tools/bazel setup writes the mode
HOST_LINE = "tools/bazel: host mode: "
PINNED_LINE = "tools/bazel: pinned mode"
PROBE = "//tools/selftest:probe_plain"
# Prints what tools/bazel hands Bazel: its arguments and the client's TORCH_TEST_PYTHON.
FAKE_BAZEL = """#!/bin/sh
for arg in "$@"; do echo "ARG $arg"; done
echo "ENV ${TORCH_TEST_PYTHON-<unset>}"
"""


def text_of(path: pathlib.Path) -> str:
    return path.read_text() if path.is_file() else ""


def mode_lines(output: str) -> list[str]:
    return [
        line
        for line in output.splitlines()
        if line.startswith(("tools/bazel: host mode", PINNED_LINE))
    ]


def main() -> int:
    checks = Checks("check_host_setup")
    # This check chooses the mode itself: nothing from the caller's environment.
    for name in (envvars.PYTHON, envvars.LOCK):
        os.environ.pop(name, None)

    checks.say("the setup file is git-ignored")
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", SETUP_FILE])
    checks.expect(ignored.returncode == 0, f"{SETUP_FILE} is git-ignored", "git would commit it")

    with Scratch(seed=False) as scratch:  # host and pinned modes below need no pinned @pypi
        wrapper = str(scratch.root / "tools" / "bazel")
        setup_file = scratch.root / SETUP_FILE
        venv = scratch.tmp / "venv" / "bin" / "python3"
        other = scratch.tmp / "other" / "bin" / "python3"
        for path in (venv, other):
            subprocess.run([sys.executable, "-m", "venv", str(path.parent.parent)], check=True)
        fake = scratch.tmp / "fake_bazel"
        fake.write_text(FAKE_BAZEL)
        fake.chmod(0o755)

        def call(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
            return subprocess.run(
                [wrapper, *args],
                cwd=scratch.root,
                env={**os.environ, **(env or {})},
                capture_output=True,
                text=True,
            )

        def handed(env: dict | None = None) -> tuple[str, list[str], str]:
            """(the mode lines, Bazel's arguments, the client's TORCH_TEST_PYTHON) of a plain
            `tools/bazel test` through the stand-in Bazel."""
            done = call("test", PROBE, env={"BAZEL_REAL": str(fake), **(env or {})})
            args = [line[4:] for line in done.stdout.splitlines() if line.startswith("ARG ")]
            client = [line[4:] for line in done.stdout.splitlines() if line.startswith("ENV ")]
            return "\n".join(mode_lines(done.stderr)), args, (client or ["?"])[0]

        def expect_mode(what: str, env: dict | None, python: pathlib.Path | None, line: str):
            lines, args, client = handed(env)
            checks.expect(
                len(lines.splitlines()) == 1 and re.fullmatch(line, lines) is not None,
                f"{what}: one line /{line}/",
                f"mode lines: {lines!r}",
            )
            passed = [a for a in args if a.startswith(f"--repo_env={envvars.PYTHON}=")]
            want = [f"--repo_env={envvars.PYTHON}={python}"] if python else []
            checks.expect(
                passed == want, f"{what}: Bazel gets {want or 'no interpreter'}", f"{passed}"
            )
            want_client = str(python) if python else "<unset>"
            checks.expect(
                client == want_client,
                f"{what}: the client's {envvars.PYTHON} is {want_client}",
                f"it is {client}",
            )

        checks.say("tools/bazel setup --host-python=VENV")
        done = call("setup", f"--host-python={venv}")
        checks.expect(done.returncode == 0, "setup succeeded", done.stderr[-2000:])
        set_up = checks.expect(
            setup_file.is_file() and setup_file.read_text().strip() == str(venv),
            f"{SETUP_FILE} names the venv",
            setup_file.read_text() if setup_file.is_file() else "no file",
        )
        from_file = (
            re.escape(f"{HOST_LINE}{venv}")
            + r" \(set by tools/bazel setup; TORCH_TEST_PYTHON overrides\)"
        )
        expect_mode("a plain command", None, venv, from_file)

        checks.say("a plain `tools/bazel test` runs in host mode")
        if not set_up:  # a plain run would fetch the whole pinned lock, to show nothing
            checks.fail("no host mode set up: the real run is left out")
            return checks.finish()
        run = scratch.bazel.test(PROBE)
        run.expect(checks, PROBE, "PASSED", "fresh", "the probe ran")
        checks.expect(
            len(mode_lines(run.output)) == 1 and re.fullmatch(from_file, mode_lines(run.output)[0]),
            "Bazel's output has the one mode line",
            f"{mode_lines(run.output)}",
        )
        pypi = scratch.output_base / "external" / "pypi"
        manifest = text_of(pypi / "manifest.json")
        checks.expect('"mode": "host"' in manifest, "@pypi is in host mode", manifest[:300])
        fingerprint = text_of(pypi / "fingerprint.txt")
        checks.expect(
            f"interpreter {venv}" in fingerprint,
            "@pypi's interpreter is the venv",
            fingerprint[:300],
        )

        checks.say("TORCH_TEST_PYTHON overrides the file")
        expect_mode(
            "TORCH_TEST_PYTHON=OTHER",
            {envvars.PYTHON: str(other)},
            other,
            re.escape(f"{HOST_LINE}{other}") + r" \(TORCH_TEST_PYTHON\)",
        )
        over_file = re.escape(PINNED_LINE) + r": .*TORCH_TEST_PYTHON.*"
        expect_mode("TORCH_TEST_PYTHON=pinned", {envvars.PYTHON: "pinned"}, None, over_file)
        expect_mode("TORCH_TEST_PYTHON= (empty)", {envvars.PYTHON: ""}, None, over_file)

        checks.say("tools/bazel setup --pinned")
        done = call("setup", "--pinned")
        checks.expect(done.returncode == 0, "setup --pinned succeeded", done.stderr[-2000:])
        checks.expect(not setup_file.exists(), f"{SETUP_FILE} is gone", "it is still there")
        expect_mode("a plain command", None, None, re.escape(PINNED_LINE) + r": .*")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
