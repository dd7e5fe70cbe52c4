"""Where a source's cases went: one log line per target, the cases of each sibling variant.

The variant plugin places every collected case in one variant (tools/runner/session/plugin.py);
each target runs its own and deselects the rest. This prints, in every target's log,

    torch_test placement: cpu=8 gpu=3 multi_gpu=43 (this target: cpu)

and, with --test_env=TORCH_TEST_SHOW_PLACEMENT=1, each case's node id under its variant. The
counts line is also what tools/ci/summarize_testlogs.py reads to count the cases of targets
this host skipped (GPU variants on a CPU host): `parse` reads it back. A source that yields no
case at all gets the imports that found no module (tools/runner/session/missing_imports.py) named.
"""

import os
import re
import sys

from tools.hardware import envvars
from tools.runner.session import missing_imports

PREFIX = "torch_test placement: "
_LINE = re.compile(re.escape(PREFIX) + r"(?P<counts>(?:\S+=\d+ ?)*)\(this target: (?P<own>\S+)\)")


def line(placed: dict[str, str | None], own: str) -> str:
    """The counts line for {node id: variant} as seen from variant `own`."""
    from tools.hardware import variants  # the table: not needed to parse a log (CI's summary)

    counts = {v: sum(1 for p in placed.values() if p == v) for v in variants.VARIANTS}
    shown = " ".join(f"{v}={n}" for v, n in counts.items() if n)
    return f"{PREFIX}{shown} (this target: {own})"


def listing(placed: dict[str, str | None]) -> list[str]:
    """Each case's node id under its variant (TORCH_TEST_SHOW_PLACEMENT=1)."""
    from tools.hardware import variants

    out = []
    for variant in variants.VARIANTS:
        ids = sorted(n for n, p in placed.items() if p == variant)
        out += [f"torch_test placement: {variant}: {nodeid}" for nodeid in ids]
    return out


def parse(text: str) -> tuple[dict[str, int], str] | None:
    """({variant: cases}, the logging target's variant) from a log's counts line, or None."""
    found = _LINE.search(text)
    if found is None:
        return None
    pairs = (pair.split("=") for pair in found.group("counts").split())
    return {variant: int(n) for variant, n in pairs}, found.group("own")


def report(config, placed: dict[str, str | None]) -> None:
    """Writes the placement to the target's log (the terminal pytest writes to)."""
    from tools.hardware import variants

    lines = [line(placed, variants.current_variant())]
    if os.environ.get(envvars.SHOW_PLACEMENT) == "1":
        lines += listing(placed)
    if not placed and missing_imports.missing():
        # A guarded import that failed is the likeliest reason the source has no test.
        lines.append(
            "torch_test: this source yields no test case; imports that found no module while "
            "collecting it (a missing dep?): " + ", ".join(missing_imports.missing()[:12])
        )
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    for text in lines:
        if terminal is not None:
            terminal.write_line(text)
        else:
            print(text, file=sys.stderr)
