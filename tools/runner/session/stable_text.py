"""A failure's text (or a skip's reason) with what differs between runs and places folded.

A declaration is written from one run (tools/add_test.py's measuring run, a log) and held
against another (the target's runfiles tree, plain pytest, another host). Both a `match` and
the text it is held against are folded (tools/runner/session/expectations.py), so the parts of
a message that say where or when it ran, not what went wrong, read the same in every run:
paths, a test id's packages, unittest's `[N chars]`, addresses, pids, and the ranks and the
timeout's elapsed seconds of torch's multi-process messages.
Exactly what is folded, and why nothing else: docs/adding-tests.md (Declared outcomes). Folding
folded text changes nothing, so an entry may be written in either form.
"""

import os
import re

# An installed package's file, from the package on (the interpreter's or @pypi's site).
_SITE_DIR = re.compile(r"(?<![\w.~-])/[^\s'\"]*?/(?:site-packages|dist-packages|pypi/site)/")
# unittest.util._shorten: how many characters of a long repr it hid.
_CHARS = re.compile(r"\[\d+ chars\]")
# A unittest id (`module.Class.method`) names the module as it was imported, with the packages
# of wherever the file lay: `upstream.tensor.test_init.T.test_a` in a target, `test_init.T.test_a`
# beside it (torch's "Previous test failed, skipping <id>").
_ID_PACKAGES = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)+(?=test_\w*\.[A-Za-z_]\w*\.\w)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")  # shorter: a constant, not an address
_PID = re.compile(r"\b(pid\b[:=]? ?)\d+", re.IGNORECASE)
_RANKS = (
    # torch.testing._internal.common_distributed: MultiProcessTestCase's and
    # MultiThreadedTestCase's failures name the first rank (process or thread) that failed.
    (re.compile(r"\b(Process|Thread) \d+ (exited|terminated)\b"), r"\1 R \2"),
    # torch.distributed's prefixes: distributed_c10d's excepthook, FSDP, c10d's watchdog.
    (re.compile(r"\[rank\d+\]"), "[rankR]"),
    (re.compile(r"(\[[^\[\]\n]*\bRank )\d+\]"), r"\1R]"),
    # common_distributed's timeout names the seconds the parent waited before it looked again.
    (re.compile(r"\b(timed out after )\d+(?:\.\d+)? seconds"), r"\1S seconds"),
)


def _workspace_roots() -> list[str]:
    """This module's workspace root (<root>/tools/runner/session/stable_text.py) as imported
    and as resolved: a runfiles tree's files link to the checkout, and a path some code
    resolved (os.path.realpath) reads from there; longest first."""
    here = os.path.abspath(__file__)
    roots = set()
    for path in (here, os.path.realpath(here)):
        for _ in range(4):
            path = os.path.dirname(path)
        if path != os.path.dirname(path):  # never the file system's root
            roots.add(path + os.sep)
    return sorted(roots, key=len, reverse=True)


_ROOTS = _workspace_roots()


def fold(text: str) -> str:
    """`text` with paths, test ids' packages, unittest's hidden-character counts, addresses,
    pids, ranks and a multi-process timeout's seconds folded."""
    text = _SITE_DIR.sub("", text)
    for root in _ROOTS:
        text = text.replace(root, "")
    text = _ID_PACKAGES.sub("", text)
    text = _CHARS.sub("[N chars]", text)
    text = _ADDRESS.sub("0x?", text)
    text = _PID.sub(r"\1N", text)
    for pattern, folded in _RANKS:
        text = pattern.sub(folded, text)
    return text
