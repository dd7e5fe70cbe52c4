#!/usr/bin/env bash
# Runs this repository's Bazel commands with the self-contained bundle that
# tools/bundle/make_bazel_bundle.sh makes: for hosts with no Java and no Bazel. A drop-in for
# /usr/bin/bazel-4: same arguments (startup options, command, its options and targets), any cwd
# inside the workspace.
#
# Usage: TORCH_TEST_BAZEL_BUNDLE=.bundle/bazel-bundle.tar.xz tools/bundle/bazel_from_bundle.sh test //...
#
# A .tar.xz is unpacked once (atomically; concurrent first runs are safe) into
# $CACHE/bazel-bundle-<first 16 hex digits of its sha256>; a directory is used as it is.
# Then the bundle's client runs with
#   --nosystem_rc                  /etc/bazel/bazelrc is Debian's, absent on such hosts
#   --install_base=<b>/usr/share/bazel --trust_install_base --server_javabase=<b>/opt/minjre
# and, right after the command word of commands that take repository options,
#   --override_repository=rules_java=<b>/usr/share/bazel/rules/java
#   --override_repository=platforms=<b>/usr/share/bazel/tools/platforms
# because WORKSPACE points these two local_repository rules at Debian's /usr/share/bazel paths.
# No host JDK is needed for py_test targets; Java rules cannot build with the bundle (no javac).
#
# Environment:
#   TORCH_TEST_BAZEL_BUNDLE        the bundle: a .tar.xz or an unpacked directory; a relative path
#                                  is taken from the cwd, else from the workspace root
#                                  (default: <workspace>/.bundle/bazel-bundle.tar.xz)
#   TORCH_TEST_BAZEL_BUNDLE_CACHE  where .tar.xz bundles are unpacked
#                                  (default: ${XDG_CACHE_HOME:-$HOME/.cache}/torch_tests)
set -euo pipefail

die() { echo "bazel_from_bundle: $*" >&2; exit 2; }

readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="${TORCH_TEST_BAZEL_BUNDLE:-${root}/.bundle/bazel-bundle.tar.xz}"
if [[ $bundle != /* && ! -e $bundle && -e ${root}/${bundle} ]]; then
  bundle="${root}/${bundle}"
fi
[[ -e $bundle ]] ||
  die "no bundle at ${bundle} (set TORCH_TEST_BAZEL_BUNDLE; make one with tools/bundle/make_bazel_bundle.sh)"

if [[ -d $bundle ]]; then
  b="$(cd "${bundle}" && pwd)"
else
  [[ $bundle == *.tar.xz ]] || die "TORCH_TEST_BAZEL_BUNDLE=${bundle} is neither a directory nor a .tar.xz"
  if [[ -n ${TORCH_TEST_BAZEL_BUNDLE_CACHE:-} ]]; then
    cache="${TORCH_TEST_BAZEL_BUNDLE_CACHE}"
  elif [[ -n ${XDG_CACHE_HOME:-} ]]; then
    cache="${XDG_CACHE_HOME}/torch_tests"
  else
    cache="${HOME:?bazel_from_bundle: set HOME or TORCH_TEST_BAZEL_BUNDLE_CACHE}/.cache/torch_tests"
  fi
  sha="$(sha256sum "${bundle}" | cut -c1-16)"
  b="${cache}/bazel-bundle-${sha}"
  if [[ ! -d $b ]]; then
    mkdir -p "${cache}"
    tmp="$(mktemp -d "${cache}/.bazel-bundle-${sha}.XXXXXX")"
    echo "bazel_from_bundle: unpacking ${bundle} into ${b}" >&2
    if ! tar -xJf "${bundle}" -C "${tmp}"; then
      rm -rf "${tmp}"
      die "cannot unpack ${bundle}"
    fi
    # Atomic: a concurrent first run either wins the rename or finds the directory complete.
    mv -T "${tmp}" "${b}" 2>/dev/null || rm -rf "${tmp}"
  fi
fi

for f in usr/bin/bazel-4 usr/share/bazel/A-server.jar usr/share/bazel/rules/java/WORKSPACE \
  usr/share/bazel/tools/platforms/WORKSPACE opt/minjre/bin/java; do
  [[ -e ${b}/${f} ]] || die "${b} is not a complete bundle: no ${f} (remove it and run again)"
done

startup=(
  --nosystem_rc
  "--install_base=${b}/usr/share/bazel"
  --trust_install_base
  "--server_javabase=${b}/opt/minjre"
)
overrides=(
  "--override_repository=rules_java=${b}/usr/share/bazel/rules/java"
  "--override_repository=platforms=${b}/usr/share/bazel/tools/platforms"
)

# The first non-option argument is the command (as in tools/bazel); the overrides go right after
# it, before the user's own options, so an explicit --override_repository still wins.
args=("$@")
cmd_index=-1
for i in "${!args[@]}"; do
  if [[ ${args[$i]} != -* ]]; then cmd_index=$i; break; fi
done
if ((cmd_index >= 0)); then
  case ${args[$cmd_index]} in
    # Commands that read WORKSPACE (every Bazel 4.2.3 command accepts the flag; these need it).
    build | test | run | coverage | query | cquery | aquery | fetch | sync | info | clean | \
      print_action | mobile-install | config)
      args=("${args[@]:0:cmd_index+1}" "${overrides[@]}" "${args[@]:cmd_index+1}")
      ;;
  esac
fi
exec "${b}/usr/bin/bazel-4" "${startup[@]}" "${args[@]}"
