"""The environment bench/ gives plain pytest: what torch_test gives a test of the same variant.

The ratios the benches report compare Bazel with plain pytest, so both sides must run the tests
under the same variables: torch_test's COMMON_ENV (tools/hardware/envvars.bzl), the variant's
env from the table (tools/build_defs/variants.bzl), the runner's pytest plugin settings; and none
of this process's TORCH_TEST_* variables.
"""

import os

from tools.hardware import envvars, table

ENVVARS_BZL = table.ROOT / "tools" / "hardware" / "envvars.bzl"


def plain_pytest_env(variant: str, pythonpath: str, **extra: str) -> dict[str, str]:
    """This process's environment as a plain pytest run of `variant` needs it; `extra` last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    env.update(table.read_literals(ENVVARS_BZL)["COMMON_ENV"])
    env.update(table.table()["VARIANTS"][variant]["env"])
    env.update(
        {envvars.VARIANT: variant, "PYTHONPATH": pythonpath, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    env.update(extra)
    return env
