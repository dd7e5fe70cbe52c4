"""Cache-correctness probe: prints the versions of the modules named on its command line.

The targets built from it (BUILD.bazel) differ only in what they depend on, so the selftest
scripts can check that an edit re-runs exactly the targets that depend on what changed.
"""

import importlib
import sys

for name in sys.argv[1:]:
    module = importlib.import_module(name)
    print(name, getattr(module, "__version__", "(no version)"))
