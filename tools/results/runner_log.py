"""What the runner (tools/runner/pytest_runner.py) writes into a test.log, read back.

torch_test resources: wall_s=.. cpu_s=.. peak_rss_mib=.. children_peak_rss_mib=..
torch_test: FAILED: ...; the last test that started: NODEID      (tools/runner/completion.py)
*** SIGTERM (Bazel timeout?) while running NODEID (call): stacks of all threads ***
===== tests the module defines but pytest never runs fail this target =====   (outcome_audit)
MODULE.Class: a unittest.TestCase with tests (...) that pytest does not collect: ...
Current thread 0x... (most recent call first):                  (faulthandler's dump)
  File "...", line N in NAME
"""

import re

RESOURCES = re.compile(r"torch_test resources: (.*)$", re.M)
LAST_STARTED = re.compile(r"the last test that started: (.+?)\s*$", re.M)
SIGTERM = re.compile(r"^\*\*\* SIGTERM .*?(?: while running (.+?) \((?:setup|call|teardown)\))?:")
RUNFILES = re.compile(r'File "[^"]*?\.runfiles/')
NEVER_RUN_SECTION = "tests the module defines but pytest never runs fail this target"
# pytest's section rule: "==== title ====", or a bare rule ending the summary.
SECTION = re.compile(r"^=+ ?(.*?) ?=+$")
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
    """The lines of test_utils.outcome_audit's section of what the module defines and pytest
    never ran (a test class never collected, a collection warning): no test.xml case shows them."""
    found, inside = [], False
    for line in text.splitlines():
        rule = SECTION.match(line.strip())
        if rule:
            inside = rule.group(1) == NEVER_RUN_SECTION
        elif inside and line.strip():
            found.append(line.strip())
    return found
