"""pytest options that keep a target's tests from running, refused by the runner.

A torch_test target passes only for tests that ran; with these options pytest lists, plans or
sets up tests without running them (`--setup-only`: "no tests ran", status 0), or prints help;
`-p no:<plugin>` of the plugins that select the variant and judge outcomes would turn the
judging off, and `-o addopts=...` would carry options past this check.
They are refused under `bazel test` and `bazel run` alike, from the target's args, the command
line and PYTEST_ADDOPTS: the runner's completion proof would fail them anyway, with a message
about an early exit. To list tests or fixtures, run pytest on the file directly.
pytest parses options without abbreviations (allow_abbrev=False), so exact names suffice; the
arguments are read as argparse reads them, short options in clusters (`-qo addopts=V` is `-q
-o addopts=V`, `-qpno:X` is `-q -p no:X`), not matched as spellings.
"""

import shlex

REFUSED = set(
    "--collect-only --co --collectonly --setup-only --setup-plan --fixtures --funcargs "
    "--fixtures-per-test --markers --help -h --version -V".split()
)


# Plugins a target cannot run without (tools.runner.session.plugin registers the other). Other
# doors (an ini file's addopts, a conftest) are closed by the runner's witness: a session whose
# plugin never ran fails (tools/runner/pytest_runner.py _plugin_problems).
REQUIRED_PLUGINS = ("tools.runner.session.plugin", "torch_test_outcome_audit")


# `-o addopts=...` replaces the ini file's addopts: options this check never reads, such as
# `-p no:torch_test_outcome_audit`, which switches off the one judge of a module skipped at
# import (the inventory finds no case in it to miss). What it would carry can be given as is.
OVERRIDE_INI = ("-o", "--override-ini")
# pytest's short options that take a value (tests/test_user_filter.py holds this to pytest's
# parser); every other short option is a flag, so `-qo V` is `-q -o V`, as argparse reads it.
_SHORT_VALUED = "kmWcpor"


def _options(given: list[str]):
    """(option, value or None, as written) of each option in `given`, as argparse reads them:
    `--name=V`, `--override-ini V`, a cluster of short ones (`-qsoV`, `-qo V`, `-o=V`)."""
    i = 0
    while i < len(given):
        arg, i = given[i], i + 1
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if not eq and name in OVERRIDE_INI and i < len(given):
                value, arg, i = given[i], f"{arg} {given[i]}", i + 1
            yield name, value or None, arg
            continue
        if not arg.startswith("-"):
            continue
        for j, char in enumerate(arg[1:], start=2):
            if char not in _SHORT_VALUED:
                yield f"-{char}", None, arg
                continue
            value = arg[j:].removeprefix("=")
            if not value and i < len(given):
                value, arg, i = given[i], f"{arg} {given[i]}", i + 1
            yield f"-{char}", value, arg
            break


def refused(args: list[str], env) -> list[str]:
    """The refused options among `args` and PYTEST_ADDOPTS, as written."""
    given = list(args) + shlex.split(env.get("PYTEST_ADDOPTS", ""))
    disabling = {f"no:{plugin}" for plugin in REQUIRED_PLUGINS}
    found = []
    for name, value, shown in _options(given):
        if (
            name in REFUSED or name == "-p" and value in disabling or _sets_addopts(name, value)
        ) and shown not in found:
            found.append(shown)
    return found


def _sets_addopts(name: str, value: str | None) -> bool:
    return name in OVERRIDE_INI and (value or "").startswith("addopts=")


def message(options: list[str], test_file: str) -> str:
    """One line: the refused options, and why."""
    why, addopts = (
        [],
        [any(_sets_addopts(*o[:2]) for o in _options(s.split(" ", 1))) for s in options],
    )
    if not all(addopts):
        why.append(
            "they keep the tests from running, and a target passes only for tests that ran. To "
            f"list tests or fixtures, run pytest on the source directly: python3 -m pytest "
            f"{test_file} --collect-only"
        )
    if any(addopts):
        why.append(
            "-o addopts replaces the ini file's addopts with options the runner never checks "
            "(it could switch the outcome audit off); give those options as they are"
        )
    return f"torch_test: refusing pytest option(s) {' '.join(options)}: {'; '.join(why)}"
