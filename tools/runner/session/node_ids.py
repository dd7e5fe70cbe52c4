"""Selection by exact pytest node id: what a re-run of one failing case needs.

    bazel test --test_env=TORCH_TEST_NODE_IDS='["t.py::C::test_x[relu inplace]"]' //pkg:t

Bazel's --test_filter reaches the runner as a `-k` expression, which cannot name a
parametrized case whose id has spaces, brackets or operators (`test_x[relu inplace]` is "Wrong
expression passed to '-k'"). This variable holds a JSON list of node ids, kept verbatim; a
test whose node id is not in it is deselected. An id that matches nothing selects nothing
(the runner then fails the target: "no tests selected"), so a re-run never passes by running
something else.
"""

import json
import os

from tools.hardware import envvars

ENV = envvars.NODE_IDS


class NodeIdSelector:
    """pytest plugin: keeps exactly the listed node ids, before the variant and shard selection."""

    def __init__(self, wanted: set[str]):
        self.wanted = wanted

    @classmethod
    def from_env(cls, env=os.environ):
        if not env.get(ENV):
            return None
        ids = json.loads(env[ENV])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise SystemExit(f"{ENV} must be a JSON list of pytest node ids, got {env[ENV]!r}")
        return cls(set(ids))

    def pytest_collection_modifyitems(self, config, items):
        keep = [i for i in items if i.nodeid in self.wanted]
        drop = [i for i in items if i.nodeid not in self.wanted]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    pytest_collection_modifyitems.tryfirst = True
