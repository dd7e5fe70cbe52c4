"""check_shards.py: issue 28's example of a sharded target that could lose a case.

pytest names these parameters by position (case0, ...) over a set, whose order follows the
process's hash seed; the gelu case fails. Each shard must fail, naming the unstable ids,
rather than pass in the run where gelu landed in no shard.
"""

import pytest


@pytest.mark.parametrize("case", {("relu", "float32"), ("gelu", "float16"), ("tanh", "bfloat16")})
def test_activation(case):
    name, _ = case
    assert name != "gelu"
