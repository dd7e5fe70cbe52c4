"""check_bytecode_poison.sh, step 1: a test that forges the bytecode of torch/__init__.py.

It writes, where its own interpreter looks for that bytecode (PYTHONPYCACHEPREFIX, or
__pycache__), an entry whose code says torch is 6.66.6, with the header the real entry has or
would have (the real source's hash, or its mtime and size), so Python's own validation accepts
it. It passes whether or not the write succeeds; a later target,
//tools/selftest:probe_bytecode_victim, says whether it imported the forgery.
"""

import importlib.util
import os
import sys
from importlib import _bootstrap_external as external

FORGED = '__version__ = "6.66.6"\n'


def _forged_pyc(source: str, real: bytes | None) -> bytes:
    code = compile(FORGED, source, "exec")
    flags = int.from_bytes(real[4:8], "little") if real and len(real) >= 16 else 0
    if flags & 0b1:  # hash-based: carry the real source's hash
        with open(source, "rb") as f:
            source_hash = importlib.util.source_hash(f.read())
        return external._code_to_hash_pyc(code, source_hash, checked=bool(flags & 0b10))
    st = os.stat(source)
    return external._code_to_timestamp_pyc(code, st.st_mtime, st.st_size)


def test_forge_torch_bytecode():
    source = importlib.util.find_spec("torch").origin
    target = importlib.util.cache_from_source(source)
    real = None
    if os.path.exists(target):
        with open(target, "rb") as f:
            real = f.read()
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(_forged_pyc(source, real))
        print(f"forged {target}", file=sys.stderr)
    except OSError as error:
        print(f"could not forge {target}: {error}", file=sys.stderr)
