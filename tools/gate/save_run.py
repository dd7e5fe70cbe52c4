"""Saves one `bazel test` run for the gate: its build event file, test.xml/test.log, hardware.

    tools/bazel test --build_event_json_file=/tmp/events.json //...
    python3 -m tools.gate.save_run /tmp/events.json /tmp/run-old-pool     # then, anywhere:
    python3 tools/gate/gate.py --baseline results:/tmp/run-old-pool \
        --candidate results:/tmp/run-new-pool

DIR gets
  events.json    the build event file, each test output's URI rewritten to DIR's own copy
                 (file:///saved-run/testlogs/...: the directory can be moved or carried)
  testlogs/      every attempt's test.xml and test.log, as LABEL/shard_S_run_R_attempt_A/NAME
  side.json      what the tests ran on: the host's hardware fingerprint (GPU model, count,
                 driver, CUDA, NCCL, interconnect; tools/gate/hardware.py), torch's build, the
                 packages, the @pypi manifest (mode, missing packages), the exact tree it
                 ran (its base commit, the tree id of the working directory with uncommitted
                 edits and untracked files, and whether it was dirty: tools/gate/tree.py), and
                 the seconds of the test actions
Only files the invocation itself wrote are saved: a build event file whose outputs a later run
replaced is refused (tools/results/bep.py). The interpreter asked for torch's build is
--python, else the checkout's host interpreter (tools/python/host_mode.py: TORCH_TEST_PYTHON or
`tools/bazel setup`), else the run's @pypi (pinned mode).
Exit 0 saved; 2 nothing saved (the message says why).
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script

from tools.gate import hardware, sides, tree  # noqa: E402
from tools.python import host_mode  # noqa: E402
from tools.results import bep  # noqa: E402

ROOT = sides.ROOT


def _relative(label: str, attempt: bep.Attempt, name: str) -> str:
    where = f"shard_{attempt.shard}_run_{attempt.run}_attempt_{attempt.attempt}"
    return f"testlogs/{label.strip('/').replace(':', '/')}/{where}/{name}"


def _interpreter(args, output_base) -> tuple[pathlib.Path | None, dict | None]:
    """(python, env) that the tests' torch is asked with."""
    python = args.python or host_mode.host_python()
    if python:
        return pathlib.Path(python), None
    if output_base is None:
        return None, None
    pypi = output_base / "external" / "pypi"
    env = dict(os.environ, PYTHONPATH=str(pypi / "site"), PYTHONNOUSERSITE="1")
    return pypi / "venv" / "bin" / "python3", env


def _packages(interpreter, output_base, manifest: dict) -> dict:
    """What the tests ran on: in host mode the interpreter's packages and what @pypi supplied
    (tools/gate/sides.packages), else the lock's, as @pypi's manifest lists them."""
    if manifest.get("mode") == "host" and interpreter:
        return sides.packages(sides.Side("saved", "python", interpreter), output_base)
    return manifest.get("packages", {})


def save(
    events: pathlib.Path, out: pathlib.Path, python: str | None = None, root: pathlib.Path = ROOT
) -> dict:
    """Copies the run into `out` (new or empty); returns side.json's content. `root`: the
    checkout the run ran (its tree is recorded)."""
    targets = bep.read(events)  # raises OutputsReplaced for another run's files
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: save each run into its own directory")
    copies = {}  # original URI path -> path under out
    for label, target in targets.items():
        for attempt in target.attempts:
            for name in ("test.xml", "test.log"):
                source = attempt.output(name)
                if source is None or not source.is_file():
                    continue
                relative = _relative(label, attempt, name)
                (out / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, out / relative)  # keeps mtime: still this run's
                copies[source] = bep.SAVED_RUN + relative
    lines = []
    for line in events.read_text().splitlines():
        if line.strip() and '"testActionOutput"' in line:
            event = json.loads(line)
            files = event["testResult"]["testActionOutput"]
            saved = [(f, copies.get(bep.local_path(f.get("uri", "")))) for f in files]
            event["testResult"]["testActionOutput"] = [dict(f, uri=u) for f, u in saved if u]
            line = json.dumps(event, separators=(",", ":"))
        lines.append(line)
    (out / "events.json").write_text("\n".join(lines) + "\n")
    exec_root = bep.exec_root(events)
    output_base = exec_root.parent.parent if exec_root else None
    interpreter, env = _interpreter(argparse.Namespace(python=python), output_base)
    manifest = sides.manifest(output_base) if output_base else {}
    side = {
        "saved_at": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "events": str(events),
        **tree.state(root),  # commit, tree (dirty edits and untracked files included), dirty
        "python": str(interpreter) if interpreter else None,
        "python_version": (sides.probe(interpreter, env) or {}).get("python")
        if interpreter
        else None,
        "manifest": manifest,
        "packages": _packages(interpreter, output_base, manifest),
        "hardware": hardware.fingerprint(interpreter, env),
        "test_actions_s": round(sum(t.duration_s for t in targets.values()), 1),
    }
    (out / "side.json").write_text(json.dumps(side, indent=1, sort_keys=True) + "\n")
    return side


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("events", type=pathlib.Path, help="--build_event_json_file of the run")
    parser.add_argument("out", type=pathlib.Path, help="directory to save the run into")
    parser.add_argument("--python", default=None, help="the interpreter the tests ran on")
    args = parser.parse_args(argv)
    try:
        side = save(args.events.resolve(), args.out.resolve(), args.python)
    except (OSError, bep.OutputsReplaced, ValueError) as error:
        print(f"save_run: {error}", file=sys.stderr)
        return 2
    hw = side["hardware"]
    dirty = " (dirty: uncommitted changes)" if side["dirty"] else ""
    print(
        f"save_run: {args.out}: {hw.get('gpu_count')} GPU(s) {hw.get('gpu_model') or ''} "
        f"torch {hw.get('torch')}, NCCL {hw.get('nccl')}, interconnect {hw.get('interconnect')}; "
        f"tree {side['tree']}{dirty} on commit {side['commit']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
