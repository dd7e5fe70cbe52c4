"""The hardware markers for tests (@requires_gpus(2), @requires_nccl, @requires_triton).

They are defined with the runner that reads them (tools/runner/session/markers.py); tests import
them from here, the test library.
"""

from tools.runner.session.markers import (  # noqa: F401
    FEATURES,
    Requirements,
    requirements_of,
    requires,
    requires_gpus,
    requires_nccl,
    requires_triton,
)
