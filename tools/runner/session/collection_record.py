"""What the test process collected, as the shards' stability check compares it.

Written by the test process of a sharded target (in its ledger, before any selection) and by
the inventory (tools/runner/session/inventory.py); compared by the runner
(tools/runner/collection.py).
"""

import re

# Reprs that differ between processes only by where an object lives.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_REPR_LIMIT = 300


def _stable_repr(value) -> str:
    return _ADDRESS.sub("0x?", repr(value))[:_REPR_LIMIT]


def case_key(item) -> str:
    """How the runner keys a case: its source's absolute path, then pytest's id within it
    (`/.../dir/test_x.py::T::test_a[p]`). Not pytest's node id, which is relative to a rootdir
    a target's ini file can move; not the file's name, which two files of a packed target
    can share."""
    return f"{item.path}::{item.nodeid.partition('::')[2]}"


def describe(items) -> dict[str, dict[str, str]]:
    """case key -> {parameter: repr} of collected items (empty for unparametrized ones)."""
    described = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec else {}
        described[case_key(item)] = {k: _stable_repr(v) for k, v in sorted(params.items())}
    return described
