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
check "triton on the cpu variant" \
  'torch_test(name = "t", variants = ["cpu", "gpu"], triton = ["cpu"])' \
  'triton lists the cpu variant'
check "nccl on an undeclared variant" \
  'torch_test(name = "t", variants = ["cpu"], nccl = ["multi_gpu"])' \
  'nccl names \["multi_gpu"\], which are not among variants'
check "a feature the table lacks" \
  'torch_test(name = "t", variants = ["cpu", "gpu"], features = {"nvshmem": ["gpu"]})' \
  'features names \["nvshmem"\]; the table.s features are'
check "features on the cpu variant" \
  'torch_test(name = "t", variants = ["cpu", "gpu"], features = {"triton": ["cpu"]})' \
  'triton lists the cpu variant'
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
  'torch_test(name = "t", env = {"TORCH_TEST_SPEC": "{}"})' \
  'env sets \["TORCH_TEST_SPEC"\]; TORCH_TEST_\* variables belong to torch_test'
check "an environment entry too long to start the test" \
  'torch_test(name = "t", env = {"BIG": "x" * 40000})' \
  'torch_test\(name = "t"\): t.s environment entry BIG is 40004 characters; one entry must stay under 32768'
check "src and srcs together" \
  'torch_test(name = "t", src = "t.py", srcs = ["t.py"])' \
  'torch_test\(name = "t"\): give src or srcs, not both'
check "empty srcs" \
  'torch_test(name = "t", srcs = [])' \
  'torch_test\(name = "t"\): srcs is empty'
for arg in variants nccl tags deps data srcs; do
  variants='variants = ["gpu"], '
  [[ $arg == variants ]] && variants=""
  check "a string for the list $arg" \
    "torch_test(name = \"t\", ${variants}$arg = \"gpu\")" \
    "torch_test\\(name = \"t\"\\): $arg must be a list, got the string \"gpu\""
done
check "variant listed twice" \
  'torch_test(name = "t", variants = ["cpu", "cpu"])' \
  'lists a variant twice'
check "expectations as a label" \
  'torch_test(name = "t", expectations = "//other:t.expectations.toml")' \
  'expectations = "//other:t.expectations.toml" must be a file beside t.py'
check "expectations not beside the source" \
  'torch_test(name = "t", expectations = "sub/t.expectations.toml")' \
  'expectations file sub/t.expectations.toml is not beside its source t.py'
check "expectations that do not exist" \
  'torch_test(name = "t", expectations = "t.expectations.toml")' \
  'expectations file t.expectations.toml does not exist in package'
check "expectations not TOML" \
  'torch_test(name = "t", expectations = "t.json")' \
  'expectations file t.json must be TOML'
# Bazel 4.2.3 keys a source directory by the directory alone: an edit inside stays cached.
mkdir -p "$scratch/goldens"
touch "$scratch/goldens/a.txt"
check "a source directory in data" \
  'torch_test(name = "t", data = ["goldens"])' \
  'data names the source directory "goldens": Bazel tracks only the directory.*use glob\(\["goldens/\*\*"\]\)'
check "a source directory in data, as a label" \
  'torch_test(name = "t", data = [":goldens"])' \
  'data names the source directory ":goldens"'

say "data: the fix the message names loads (each file of the directory an input)"
printf 'load("//tools/build_defs:torch_test.bzl", "torch_test")\n\n%s\n' \
  'torch_test(name = "t", data = glob(["goldens/**"]) + ["t.py"])' >"$scratch/BUILD.bazel"
expect_line "$("$BAZEL" query "labels(data, //$scratch:t)" 2>&1)" "^//$scratch:goldens/a.txt\$" "glob([\"goldens/**\"]) gives the files"

# spec_of TARGET: the target's spec (its env's one entry, from bazel query) as the runner's
# processes read it (tools/hardware/spec.py): the macro's value and the reader must agree.
spec_of() {
  "$BAZEL" query --output=build "$1" 2>&1 | python3 -c '
import ast, re, sys
from tools.hardware import envvars, spec
text = sys.stdin.read()
found = re.search(r"\"%s\": (\"(?:[^\"\\]|\\.)*\")" % envvars.SPEC, text)
print(spec.spec({envvars.SPEC: ast.literal_eval(found.group(1))}) if found else text)'
}

say "whole_gpu: the GPU variants, and only they, take whole GPUs (tools/runner/gpu_share.py)"
printf 'load("//tools/build_defs:torch_test.bzl", "torch_test")\n\n%s\n' \
  'torch_test(name = "t", variants = ["cpu", "gpu"], whole_gpu = True)' >"$scratch/BUILD.bazel"
expect_line "$(spec_of "//$scratch:t_gpu")" "variant='gpu',.* whole_gpu=True" "the gpu target's spec says whole"
expect_line "$(spec_of "//$scratch:t")" "variant='cpu',.* whole_gpu=False" "the cpu target's spec does not"

say "expectations: the file joins every variant's data, its runfiles path the spec"
touch "$scratch/t.expectations.toml"
printf 'load("//tools/build_defs:torch_test.bzl", "torch_test")\n\n%s\n' \
  'torch_test(name = "t", variants = ["cpu", "gpu"], expectations = "t.expectations.toml")' >"$scratch/BUILD.bazel"
for target in t t_gpu; do
  expect_line "$(spec_of "//$scratch:$target")" "expectations='$scratch/t.expectations.toml'" "$target's spec names the file"
  out="$("$BAZEL" query --output=build "//$scratch:$target" 2>&1)"
  expect_line "$out" "data = \[\"//$scratch:t.expectations.toml\"\]" "$target's data has the file"
done

rm -rf "$scratch"  # its broken BUILD file would fail the //... queries below

say "tags and suites select the hardware variants (tools/build_defs/variants.bzl)"
# query_of FILTER: the tests --test_tag_filters=FILTER selects over //... (manual ones excluded).
query_of() {
  local q='tests(//...) except attr(tags, "\bmanual\b", tests(//...))' tag
  IFS=, read -ra tags <<<"$1"
  for tag in "${tags[@]}"; do
    if [[ $tag == -* ]]; then
      q="($q) except attr(tags, \"\\b${tag#-}\\b\", tests(//...))"
    else
      q="($q) intersect attr(tags, \"\\b${tag}\\b\", tests(//...))"
    fi
  done
  "$BAZEL" query "$q" 2>/dev/null | sort
}
# table FIELD: "variant value" per variant, from the table (Python reads the same literals).
table() {
  python3 -c "from tools.hardware.table import table
for name, spec in table()['VARIANTS'].items(): print(name, spec['$1'])"
}
# Each variant's --config (checked against the table by //test_utils/tests:test_hardware_table)
# must select what the packages' suites (torch_test_suites()) hold together, and only targets
# with the variant's suffix. A package with tests but no torch_test_suites() fails this.
packages="$(grep -rlE --include=BUILD.bazel '^torch_test_suites\(\)' . | grep -v '^./bazel-' |
  sed -E 's|^\./(.*)/BUILD.bazel$|//\1|' | sort)"
while read -r variant suffix; do
  filter="$(grep -E "^test:${variant} --test_tag_filters=" .bazelrc | cut -d= -f2)"
  selected="$(query_of "$filter")"
  suites="$(sed "s/\$/:${variant}_tests/" <<<"$packages" | tr '\n' ' ')"
  suite="$("$BAZEL" query "tests(set(${suites}))" 2>/dev/null | sort)"
  if [[ -n $filter && $selected == "$suite" ]]; then
    pass "the packages' ${variant}_tests == --config=${variant} (${filter})"
  else
    fail "the packages' ${variant}_tests differ from --config=${variant} ('${filter}'): $(diff <(echo "$suite") <(echo "$selected") | grep '^[<>]' | tr '\n' ' ')(<: suites only, >: --config only)"
  fi
  if [[ -n $suffix ]]; then
    expect_line "$selected" "${suffix}\$" "${variant} selects some ${suffix} targets"
    expect_no_line "$(grep -Ev -- "${suffix}\$" <<<"$selected")" . "${variant} selects only ${suffix} targets"
  fi
done < <(table suffix)

multi="$(query_of multi_gpu)"
wide="$(table gpus | awk '$2 >= 2 {print $1}')"
wide_targets="$(for v in $wide; do query_of "$(grep -E "^test:${v} " .bazelrc | cut -d= -f2)"; done | sort)"
if [[ $multi == "$wide_targets" ]]; then pass "the multi_gpu tag selects exactly the variants of 2+ GPUs ($(echo $wide))"; else fail "the multi_gpu tag differs from the variants of 2+ GPUs"; fi

say "the host platform offers the variants of its GPU count or fewer"
offered="$("$BAZEL" query --repo_env=TORCH_TEST_GPUS=4 @local_hardware//:host --output=build 2>/dev/null)"
expect_line "$offered" 'has_gpus_1".*has_gpus_2".*has_gpus_4"' "4 GPUs (forced): 1-, 2- and 4-GPU variants"
expect_no_line "$offered" 'has_gpus_8' "4 GPUs (forced): no 8-GPU variant"
"$BAZEL" query @local_hardware//:host >/dev/null 2>&1  # back to the detected hardware
finish
