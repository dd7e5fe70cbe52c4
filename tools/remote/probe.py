"""Routing probe for the remote rig: says which variant it is and where it ran.

No torch (its ~21k-file runfiles tree would dominate the check); it needs no GPU either, so the
rig's worker that claims the GPU pool can run the GPU variants. The working directory names the
worker that ran it (tools/remote/rig.sh gives each worker its own directory).
"""

import os
import socket

print("variant", os.environ.get("TORCH_TEST_VARIANT", "?"))
print("host", socket.gethostname())
print("cwd", os.getcwd())
