"""check_bytecode_poison.sh, step 2: a later, different target imports the real torch."""

import torch


def test_imports_the_real_torch():
    assert torch.__version__ == "1.0.0", f"imported forged bytecode: torch {torch.__version__}"
