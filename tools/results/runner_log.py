"""What the runner (tools/runner/pytest_runner.py) writes into a test.log, read back.

torch_test resources: wall_s=.. cpu_s=.. peak_rss_mib=.. children_peak_rss_mib=..
torch_test lease: GPUs [0, 1] after 1.3 s (shared: REASON)       (tools/runner/pytest_runner.py)
torch_test: FAILED: ...; the last test that started: NODEID      (tools/runner/completion.py)
*** SIGTERM (Bazel timeout?) while running NODEID (call): stacks of all threads ***
torch_test: FAILED: the source's inventory:                     (tools/runner/completion.py)
  defined but never ran: test_x.py::Class::test_y
  defined but never collected by pytest: test_x.py::Class::test_z (unittest.TestCase Class)
Current thread 0x... (most recent call first):                  (faulthandler's dump)
  File "...", line N in NAME
"""

import pathlib
import re

RESOURCES = re.compile(r"torch_test resources: (.*)$", re.M)
LAST_STARTED = re.compile(r"the last test that started: (.+?)\s*$", re.M)
SIGTERM = re.compile(r"^\*\*\* SIGTERM .*?(?: while running (.+?) \((?:setup|call|teardown)\))?:")
RUNFILES = re.compile(r'File "[^"]*?\.runfiles/')
LEASE = re.compile(r"torch_test lease: GPUs (\[[\d, ]*\]) after ([\d.]+) s \((\w+): (.*)\)$", re.M)
INVENTORY = "torch_test: FAILED: the source's inventory:"  # tools/runner/pytest_runner.py
# Frames of the stack dump shown per hang: the innermost ones say where it hung.
STACK_LINES = 12


def _resource_lines(text: str) -> list[dict[str, str]]:
    return [
        dict(f.split("=", 1) for f in line.split() if "=" in f) for line in RESOURCES.findall(text)
    ]


def wall_s(text: str) -> float | None:
    """The runner's wall seconds (the last resource line: one per runner process)."""
    lines = _resource_lines(text)
    return float(lines[-1]["wall_s"]) if lines and "wall_s" in lines[-1] else None


def peak_rss_mib(text: str) -> int | None:
    """The largest peak RSS (the runner's or its children's) of a log's resource lines."""
    peaks = []
    for fields in _resource_lines(text):
        values = [float(v) for k, v in fields.items() if k.endswith("peak_rss_mib")]
        if values:
            peaks.append(max(values))
    return round(max(peaks)) if peaks else None


def hang(text: str) -> tuple[str | None, str] | None:
    """(node id of the test that was running, its thread's stack) of a SIGTERM'd run, else None.

    The node id comes from the SIGTERM line, else from the runner's last-started line; the
    stack is the dump's first thread (faulthandler writes the interrupted one first).
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if SIGTERM.match(line)), None)
    if start is None:
        return None
    running = SIGTERM.match(lines[start]).group(1)
    if running is None and (found := LAST_STARTED.findall(text)):
        running = found[-1]
    stack = []
    for line in lines[start + 1 :]:
        if not line.strip() and stack:
            break
        if line.strip():
            # Sandbox paths differ per run and say nothing: start at the runfiles root.
            stack.append(RUNFILES.sub('File "', line.rstrip()))
    return running, "\n".join(stack[: STACK_LINES + 1])


def never_run(text: str) -> list[str]:
    """What the source defines and the run never ran, from the runner's inventory verdict (a
    class pytest never collects, a case a conftest dropped): no test.xml case shows them."""
    found, inside = [], False
    for line in text.splitlines():
        if line.strip() == INVENTORY:
            inside = True
        elif inside and line.startswith("  defined but never "):
            found.append(line.strip())
        else:
            inside = False
    return found


def lease(text: str) -> dict:
    """The GPU lease of a test.log: {"gpus", "wait_s", "share"}, or {} for none."""
    found = LEASE.search(text)
    if not found:
        return {}
    gpus, wait, how, reason = found.groups()
    return {"gpus": gpus, "wait_s": float(wait), "share": f"{how}: {reason}"}


def lease_of(log: pathlib.Path | None) -> dict:
    """lease() of a test.log file; {} without one."""
    return lease(log.read_text(errors="replace")) if log is not None and log.is_file() else {}
