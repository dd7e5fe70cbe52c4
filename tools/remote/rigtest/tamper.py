"""Tries to rewrite victim.py in its runfiles (staged there by the worker); passes either way.

On a worker that shares staged files between actions, a successful write would change what the
next action that stages the same content (//rigtest:victim) runs.
"""

import os
import pathlib

victim = pathlib.Path(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], "rigtest/victim.py")
try:
    victim.chmod(0o644)
    victim.write_text("print('victim: tampered')\n")
    print("tamper: rewrote", victim)
except OSError as error:
    print("tamper: refused:", error)
