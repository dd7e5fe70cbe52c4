"""A whole candidate environment from one spec: `torch==2.15.0` -> a venv (host-mode side).

    python3 tools/gate/candidate.py torch==2.15.0     # prints the venv's python
    gate.py --candidate torch==2.15.0                  # the same, then gates python:<venv>

The venv gets requirements.in with torch pinned to the spec (other pins kept), then the
packages of requirements-nodeps.in (torchrec, fbgemm-gpu-cpu: installed without their declared
dependencies, see that file) moved to the newest release whose operator library loads with that
torch: fbgemm is built for one torch ABI, and a wrong pairing fails at import with an undefined
symbol. When no release loads, they are left out (their targets are then SKIPPED on the
candidate, and the gate calls its coverage incomplete) and the measured error is kept in
`<venv>/candidate.json` for the report.

Why a venv (host mode) and not a lock: the index serves new torch releases as CUDA builds with
a dozen nvidia wheels, and the lock tooling resolves for this host's CPU wheel; a venv is what
a user gating the upgrade installs. It is cached under ~/.cache/torch_tests/candidates/, keyed by
the spec and both requirement files, and reused while they are unchanged (a stamp marks a
finished install; an interrupted one is redone).

pip runs with PIP_CONFIG_FILE=/dev/null: this machine's pip configuration caps torch at the
releases stored locally; without it pip asks the package index (PIP_* variables still apply).
"""

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "third_party" / "python" / "requirements.in"
NODEPS = ROOT / "third_party" / "python" / "requirements-nodeps.in"
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
SPEC = re.compile(r"^torch==(\d+\.\d+\.\d+\S*)$")
STAMP = "candidate.json"
# Releases tried per package, newest first (each try installs a wheel of tens of MB).
TRIES = 3
# Loads fbgemm's operator library and torchrec's jagged tensors: the imports the torchrec target
# needs, and where a build for another torch ABI fails (undefined symbol).
LOAD_CHECK = (
    "import torch, fbgemm_gpu, torchrec.sparse.jagged_tensor, torchrec.datasets.random; "
    "torch.ops.fbgemm.asynchronous_complete_cumsum(torch.tensor([1, 2]))"
)


class CandidateError(Exception):
    """The candidate cannot be built; the message is the one line the user sees."""


def is_spec(text: str) -> bool:
    return bool(SPEC.match(text))


def _pip_env() -> dict:
    return dict(os.environ, PIP_CONFIG_FILE="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1")


def _requirement_lines(path: pathlib.Path) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]).lower()


def requirements(spec: str) -> list[str]:
    """requirements.in with torch replaced by the spec."""
    return [spec if _name(r) == "torch" else r for r in _requirement_lines(REQUIREMENTS)]


def venv_dir(spec: str) -> pathlib.Path:
    key = hashlib.sha256(
        "\n".join([spec, REQUIREMENTS.read_text(), NODEPS.read_text()]).encode()
    ).hexdigest()[:12]
    release = SPEC.match(spec).group(1)
    return CACHE / "torch_tests" / "candidates" / f"torch-{release}-{key}"


def _run(argv: list, log) -> subprocess.CompletedProcess:
    log.write("$ " + " ".join(map(str, argv)) + "\n")
    log.flush()
    done = subprocess.run(argv, env=_pip_env(), capture_output=True, text=True)
    log.write(done.stdout + done.stderr)
    return done


def _versions(python: pathlib.Path, name: str, log) -> list[str]:
    """Releases on the index, newest first (`pip index versions`)."""
    done = _run([python, "-m", "pip", "index", "versions", name], log)
    match = re.search(r"Available versions: (.+)", done.stdout)
    return [v.strip() for v in match.group(1).split(",")] if match else []


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A build for another torch ABI: the symbol it lacks says more than the wrapper's OSError.
    symbols = [
        f"{pathlib.Path(m.group(1)).name}: undefined symbol {m.group(2)[:120]}"
        for line in lines
        if (m := re.search(r"(\S+\.so): undefined symbol: (\S+)", line))
    ]
    errors = [line for line in lines if re.search(r"Error|error:", line)]
    return (symbols or errors or lines or ["(no output)"])[-1][-300:]


def _load_nodeps(python: pathlib.Path, log) -> tuple[dict, str]:
    """Installs the newest torchrec/fbgemm-gpu-cpu pair that loads; ({}, why) when none does."""
    names = [_name(r) for r in _requirement_lines(NODEPS)]
    fbgemm = _versions(python, "fbgemm-gpu-cpu", log)[:TRIES]
    torchrec = _versions(python, "torchrec", log)
    errors = []
    for version in fbgemm:
        # torchrec and fbgemm are released together: the newest torchrec of the same minor.
        minor = ".".join(version.split(".")[:2])
        match = next((t for t in torchrec if ".".join(t.split(".")[:2]) == minor), None)
        if match is None:
            continue
        pins = {"fbgemm-gpu-cpu": version, "torchrec": match}
        install = [python, "-m", "pip", "install", "-q", "--no-deps"]
        done = _run([*install, *(f"{k}=={v}" for k, v in pins.items())], log)
        if done.returncode != 0:
            errors.append(f"{pins}: install failed: {_last_error_line(done.stderr)}")
            continue
        check = _run([python, "-W", "ignore", "-c", LOAD_CHECK], log)
        if check.returncode == 0:
            return pins, ""
        errors.append(
            f"fbgemm-gpu-cpu {version} + torchrec {match}: {_last_error_line(check.stderr)}"
        )
    _run([python, "-m", "pip", "uninstall", "-y", *names], log)
    tried = "; ".join(errors) or "no release found on the index"
    return {}, f"no release of {', '.join(names)} loads with this torch ({tried})"


def build(spec: str, log_stream=sys.stderr) -> pathlib.Path:
    """The candidate's interpreter, installing the venv unless a finished one is cached."""
    if not is_spec(spec):
        raise CandidateError(f"not a candidate spec (want torch==X.Y.Z): {spec!r}")
    venv = venv_dir(spec)
    python = venv / "bin" / "python"
    if (venv / STAMP).is_file():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"gate: building candidate {spec} in {venv} (once per spec)", file=log_stream)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with (venv / "install.log").open("w") as log:
        done = _run([python, "-m", "pip", "install", "-q", *requirements(spec)], log)
        if done.returncode != 0:
            raise CandidateError(
                f"candidate {spec} does not install: {_last_error_line(done.stderr)} "
                f"(log: {venv / 'install.log'})"
            )
        pins, why = _load_nodeps(python, log)
    record = {"spec": spec, "nodeps": pins, "nodeps_missing_reason": why}
    (venv / STAMP).write_text(json.dumps(record, indent=1) + "\n")
    return python


def record(python: pathlib.Path) -> dict:
    """What build() chose for the venv of this interpreter ({} for a venv it did not build)."""
    stamp = pathlib.Path(python).parent.parent / STAMP
    return json.loads(stamp.read_text()) if stamp.is_file() else {}


def main(argv: list[str]) -> int:
    """`candidate.py SPEC` prints the interpreter; `--missing-reason SPEC`: why torchrec lacks."""
    reason = argv[:1] == ["--missing-reason"]
    try:
        python = build(argv[-1])
    except CandidateError as error:
        print(f"gate: {error}", file=sys.stderr)
        return 2
    print(record(python).get("nodeps_missing_reason", "") if reason else python)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
