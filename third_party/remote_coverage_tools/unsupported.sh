#!/bin/sh
echo "coverage is not supported in this offline workspace (see tools/bazel)" >&2
exit 1
