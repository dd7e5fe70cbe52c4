#!/usr/bin/env bash
# Contradictory torch_test declarations must fail at loading time with a message naming the
# problem. Writes throw-away BUILD files under tools/selftest/_scratch (git-ignored).
source "$(dirname "$0")/lib.sh"
scratch=tools/selftest/_scratch
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch"

check() {
  local what="$1" body="$2" pattern="$3" out
  printf 'load("//tools/build_defs:torch_test.bzl", "torch_test")\n\n%s\n' "$body" >"$scratch/BUILD.bazel"
  touch "$scratch/t.py"
  if out="$("$BAZEL" query "//$scratch:all" 2>&1)"; then
    fail "$what: query succeeded"
  else
    expect_line "$out" "$pattern" "$what"
  fi
}

say "torch_test analysis errors"
check "unknown variant" \
  'torch_test(name = "t", variants = ["cpu", "tpu"])' \
  'torch_test\(name = "t"\): unknown variants \["tpu"\]'
check "nccl on the cpu variant" \
  'torch_test(name = "t", variants = ["cpu", "gpu"], nccl = ["cpu"])' \
  'nccl lists the cpu variant'
check "nccl on an undeclared variant" \
  'torch_test(name = "t", variants = ["cpu"], nccl = ["multi_gpu"])' \
  'nccl names \["multi_gpu"\], which are not among variants'
check "shard_count dict typo" \
  'torch_test(name = "t", variants = ["cpu", "multi_gpu"], shard_count = {"multi-gpu": 2})' \
  'shard_count names \["multi-gpu"\], which are not among variants'
check "duplicate target" \
  'torch_test(name = "t")
torch_test(name = "t", src = "t.py")' \
  'target t already exists in this package'
check "same name twice with disjoint variants" \
  'torch_test(name = "t", variants = ["cpu"])
torch_test(name = "t", variants = ["gpu"])' \
  'torch_test\(name = "t"\): declared twice: target t already exists in this package'
check "env overrides a TORCH_TEST_ variable" \
  'torch_test(name = "t", env = {"TORCH_TEST_VARIANT": "gpu"})' \
  'env sets \["TORCH_TEST_VARIANT"\]; TORCH_TEST_\* variables belong to torch_test'
for arg in variants nccl tags deps data; do
  variants='variants = ["gpu"], '
  [[ $arg == variants ]] && variants=""
  check "a string for the list $arg" \
    "torch_test(name = \"t\", ${variants}$arg = \"gpu\")" \
    "torch_test\\(name = \"t\"\\): $arg must be a list, got the string \"gpu\""
done
check "variant listed twice" \
  'torch_test(name = "t", variants = ["cpu", "cpu"])' \
  'lists a variant twice'

rm -rf "$scratch"  # its broken BUILD file would fail the //... queries below

say "tags select the hardware variants"
multi="$("$BAZEL" query 'attr(tags, "\bmulti_gpu\b", tests(//...))' 2>/dev/null | sort)"
suite="$("$BAZEL" query 'tests(//:multi_gpu_tests)' 2>/dev/null | sort)"
expect_line "$multi" '_multi_gpu$' "some targets carry the multi_gpu tag"
expect_no_line "$multi" '[^u]$' "every multi_gpu-tagged target is a _multi_gpu variant"
if [[ $multi == "$suite" ]]; then pass "//:multi_gpu_tests == tag query"; else fail "//:multi_gpu_tests differs from the tag query"; fi
gpu_only="$("$BAZEL" query 'tests(//:gpu_tests)' 2>/dev/null)"
expect_no_line "$gpu_only" '_multi_gpu$' "//:gpu_tests holds no multi_gpu variant"
expect_line "$gpu_only" '_gpu$' "//:gpu_tests holds the gpu variants"
finish
