"""pytest options that keep a target's tests from running, refused by the runner.

A torch_test target passes only for tests that ran; with these options pytest lists, plans or
sets up tests without running them (`--setup-only`: "no tests ran", status 0), or prints help;
`-p no:<plugin>` of the plugins that select the variant and judge outcomes would turn the
judging off, and `-o addopts=...` would carry options past this check.
They are refused under `bazel test` and `bazel run` alike, from the target's args, the command
line and PYTEST_ADDOPTS: the runner's completion proof would fail them anyway, with a message
about an early exit. To list tests or fixtures, run pytest on the file directly.
pytest parses options without abbreviations (allow_abbrev=False), so exact names suffice.
"""

import re
import shlex

REFUSED = (
    "--collect-only",
    "--co",
    "--collectonly",
    "--setup-only",
    "--setup-plan",
    "--fixtures",
    "--funcargs",
    "--fixtures-per-test",
    "--markers",
    "--help",
    "-h",
    "--version",
    "-V",
)


# Plugins a target cannot run without (tools.runner.session.plugin registers the other). Other
# doors (an ini file's addopts, a conftest) are closed by the runner's witness: a session whose
# plugin never ran fails (tools/runner/pytest_runner.py _plugin_problems).
REQUIRED_PLUGINS = (
    "tools.runner.session.plugin",
    "torch_test_outcome_audit",
)


# `-o addopts=...` replaces the ini file's addopts: options this check never reads, such as
# `-p no:torch_test_outcome_audit`, which switches off the one judge of a module skipped at
# import (the inventory finds no case in it to miss). What it would carry can be given as is.
OVERRIDE_INI = ("-o", "--override-ini")
# Each spelling argparse reads: `-o V`, `-oV`, `-o=V`, `--override-ini V`, `--override-ini=V`.
_OVERRIDES_ADDOPTS = re.compile(r"(-o|--override-ini)[ =]?addopts=")


def refused(args: list[str], env) -> list[str]:
    """The refused options among `args` and PYTEST_ADDOPTS, as written."""
    given = list(args) + shlex.split(env.get("PYTEST_ADDOPTS", ""))
    disabling = {f"{p}no:{plugin}" for plugin in REQUIRED_PLUGINS for p in ("", "-p")}
    found = [a for a in given if a.split("=", 1)[0] in REFUSED or a in disabling]
    for i, arg in enumerate(given):
        shown = f"{arg} {given[i + 1]}" if arg in OVERRIDE_INI and i + 1 < len(given) else arg
        if _OVERRIDES_ADDOPTS.match(shown):
            found.append(shown)
    return found


def message(options: list[str], test_file: str) -> str:
    """One line: the refused options, and why."""
    why = []
    if not all(_overrides_addopts(o) for o in options):
        why.append(
            "they keep the tests from running, and a target passes only for tests that ran. To "
            f"list tests or fixtures, run pytest on the source directly: python3 -m pytest "
            f"{test_file} --collect-only"
        )
    if any(_overrides_addopts(o) for o in options):
        why.append(
            "-o addopts replaces the ini file's addopts with options the runner never checks "
            "(it could switch the outcome audit off); give those options as they are"
        )
    return f"torch_test: refusing pytest option(s) {' '.join(options)}: {'; '.join(why)}"


def _overrides_addopts(shown: str) -> bool:
    """Whether `shown`, one of `refused`'s, is an `-o addopts=...`."""
    return _OVERRIDES_ADDOPTS.match(shown) is not None
