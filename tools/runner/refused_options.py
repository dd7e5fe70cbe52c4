"""pytest options that keep a target's tests from running, refused by the runner.

A torch_test target passes only for tests that ran; with these options pytest lists, plans or
sets up tests without running them (`--setup-only`: "no tests ran", status 0), or prints help;
`-p no:<plugin>` of the plugins that select the variant and judge outcomes would turn the
judging off.
They are refused under `bazel test` and `bazel run` alike, from the target's args, the command
line and PYTEST_ADDOPTS: the runner's completion proof would fail them anyway, with a message
about an early exit. To list tests or fixtures, run pytest on the file directly.
pytest parses options without abbreviations (allow_abbrev=False), so exact names suffice.
"""

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
# doors (an ini file's addopts, -o addopts, a conftest) are closed by the runner's witness:
# a session whose plugin never ran fails (tools/runner/pytest_runner.py _plugin_problems).
REQUIRED_PLUGINS = (
    "tools.runner.session.plugin",
    "torch_test_outcome_audit",
)


def refused(args: list[str], env) -> list[str]:
    """The refused options among `args` and PYTEST_ADDOPTS, as written."""
    given = list(args) + shlex.split(env.get("PYTEST_ADDOPTS", ""))
    disabling = {f"{p}no:{plugin}" for plugin in REQUIRED_PLUGINS for p in ("", "-p")}
    return [a for a in given if a.split("=", 1)[0] in REFUSED or a in disabling]


def message(options: list[str], test_file: str) -> str:
    return (
        f"torch_test: refusing pytest option(s) {' '.join(options)}: they keep the tests from "
        "running, and a target passes only for tests that ran. To list tests or fixtures, run "
        f"pytest on the source directly: python3 -m pytest {test_file} --collect-only"
    )
