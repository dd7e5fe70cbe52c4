"""Runs a function on a module once it is imported, so that processes that never import it
pay nothing (the inductor patches: vec_isa_memo.py, kernel_cache.py, beside this file).
"""

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable


def when_imported(name: str, then: Callable, *args) -> None:
    """Calls `then(module, *args)` now if `name` is imported, else right after its import
    runs; once per (name, then) while it waits."""
    module = sys.modules.get(name)
    if module is not None:
        then(module, *args)
    elif not any(isinstance(f, _Finder) and f.key == (name, then) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(name, then, args))


def pending(name: str) -> bool:
    """Whether a function waits for `name`'s import."""
    return any(isinstance(f, _Finder) and f.key[0] == name for f in sys.meta_path)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the module as the other finders do, and calls `then` once it has run."""

    def __init__(self, name: str, then: Callable, args: tuple):
        self.key = (name, then)
        self.args = args

    def find_spec(self, name, path=None, target=None):
        if name != self.key[0]:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run_module = spec.loader.exec_module
            then, args = self.key[1], self.args

            def exec_module(module):
                run_module(module)
                then(module, *args)

            spec.loader.exec_module = exec_module
        return spec
