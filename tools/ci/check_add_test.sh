#!/usr/bin/env bash
# tools/add_test.py's stanzas, pasted as printed, load and collect as printed: for every
# upstream-style file (upstream_style_tests/, the three dependency cases among them), the file
# and add_test's stanza go into a throw-away package (tools/ci/_scratch_add_test, git-ignored),
# its targets run, and each cpu target's placement line (tools/runner/session/placement.py) must count
# what add_test printed per variant. Files expected to fail (an undeclared skip, a stale
# declaration: tools/runner/tests:test_upstream_fixtures) are checked for placement only.
source "$(dirname "$0")/../selftest/lib.sh"
scratch=tools/ci/_scratch_add_test
trap 'rm -rf "$scratch"' EXIT
rm -rf "$scratch"
mkdir -p "$scratch"
printf 'load("//tools/build_defs:torch_test.bzl", "torch_test")\n' >"$scratch/BUILD.bazel"
expected_to_fail=(test_upstream_undeclared_skip test_upstream_stale_declaration)
names=()
for file in upstream_style_tests/test_*.py; do
  name="$(basename "$file" .py)"
  say "add_test on $file"
  if ! printed="$(python3 tools/add_test.py "$file")"; then
    fail "$file: add_test failed: $(tail -n 5 <<<"$printed")"
    continue
  fi
  cp "$file" "$scratch/"
  if [[ -f upstream_style_tests/$name.expectations.toml ]]; then
    cp "upstream_style_tests/$name.expectations.toml" "$scratch/"
  elif grep -q '^# Review, then save as' <<<"$printed"; then
    # As a user would: the measured entries, saved as the stanza names them.
    sed -n '/^# Review, then save as/,$p' <<<"$printed" | tail -n +2 >"$scratch/$name.expectations.toml"
  fi
  # The stanza as printed: from `torch_test(` to its closing `)`.
  sed -n '/^torch_test(/,/^)/p' <<<"$printed" >>"$scratch/BUILD.bazel"
  # Printed counts, `# VARIANT: N cases`, as the placement line writes them: VARIANT=N.
  grep -E '^# [a-z_0-9]+: [0-9]+ cases$' <<<"$printed" | sed -E 's/^# ([a-z_0-9]+): ([0-9]+) cases$/\1=\2/' |
    tr '\n' ' ' | sed 's/ $//' >"$scratch/$name.printed"
  names+=("$name")
done

say "the pasted stanzas load and their targets run"
events="$scratch/events.json"
"$BAZEL" test "$(test_events "$events")" --keep_going "//$scratch:all" >"$scratch/bazel.log" 2>&1 || true
for name in "${names[@]}"; do
  log="bazel-testlogs/$scratch/$name/test.log"
  want="$(<"$scratch/$name.printed")"
  got="$(grep -oE 'torch_test placement: [^(]*' "$log" 2>/dev/null | head -n 1 | sed -E 's/torch_test placement: //; s/ $//')"
  if [[ $got == "$want" ]]; then pass "$name: placement $got as printed"; else fail "$name: printed '$want', the target placed '$got'"; fi
  if [[ " ${expected_to_fail[*]} " != *" $name "* ]]; then
    judge "$name PASSED" "$events" --expect "//$scratch:$name" PASSED any
  fi
done
finish
