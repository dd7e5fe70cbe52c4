"""Fails: a remote result saying PASSED means its inputs were changed behind Bazel's back."""

import sys

print("victim: the source as committed exits 1")
sys.exit(1)
