#!/usr/bin/env bash
# Packs Debian's Bazel 4.2.3 (package bazel-bootstrap) and a minimal Java 17 runtime into one
# .tar.xz for hosts with no Java and no Bazel (the air-gapped GPU machines). Run the result with
# tools/bundle/bazel_from_bundle.sh.
#
# Usage: tools/bundle/make_bazel_bundle.sh OUT.tar.xz
#
# Build host: Debian/Ubuntu with bazel-bootstrap, bazel-rules-java, bazel-platforms, a JDK 17
# with jmods (openjdk-17-jdk-headless), patchelf, xz, ldd. Missing pieces are an error.
#
# Environment:
#   BUNDLE_JDK  JDK whose jlink and jmods make the runtime
#               (default /usr/lib/jvm/java-17-openjdk-amd64)
#   BUNDLE_XZ   xz options (default "-T0 -6")
#
# Layout of the bundle (it mirrors Debian's install, so the install base's relative symlinks
# into libexec/ and lib/ keep working):
#   usr/bin/bazel-4                          the client
#   usr/share/bazel/                         install base, incl. rules/java and tools/platforms
#   usr/libexec/x86_64-linux-gnu/bazel/      linux-sandbox, process-wrapper, daemonize, ...
#   usr/lib/x86_64-linux-gnu/bazel/          libcpu_profiler.so
#   usr/lib/x86_64-linux-gnu/                every non-glibc shared library the above and the
#                                            runtime need (grpc, absl, protobuf, libstdc++, ...)
#   opt/minjre/                              jlink'ed Java 17 runtime for the Bazel server
#   BUNDLE_INFO                              versions and contents
# Every bundled executable gets an $ORIGIN-relative RPATH to usr/lib/x86_64-linux-gnu, so nothing
# needs LD_LIBRARY_PATH: that variable would leak from the client into the server, repository
# rules and `bazel run`, and never reaches process-wrapper/linux-sandbox (actions get a fixed
# environment), which need libprotobuf too. The host must provide glibc >= BUNDLE_INFO's
# min_glibc.
set -euo pipefail

die() { echo "make_bazel_bundle: $*" >&2; exit 2; }

(($# == 1)) || die "usage: $0 OUT.tar.xz"
out="$1"
[[ $out == *.tar.xz ]] || die "OUT must end in .tar.xz: ${out}"
out_dir="$(dirname "${out}")"
[[ -d $out_dir ]] || die "no directory ${out_dir} for ${out}"
out="$(cd "${out_dir}" && pwd)/$(basename "${out}")"

readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly want_version="$(<"${root}/.bazelversion")"
readonly jdk="${BUNDLE_JDK:-/usr/lib/jvm/java-17-openjdk-amd64}"
read -r -a xz_opts <<<"${BUNDLE_XZ:--T0 -6}"
readonly modules=java.base,java.compiler,java.instrument,java.naming,java.sql,jdk.management,jdk.sctp,jdk.unsupported,java.logging,java.xml,jdk.crypto.ec
readonly multiarch=x86_64-linux-gnu
readonly helpers=(build-runfiles daemonize linux-sandbox process-wrapper zipper)

# --- Inputs -------------------------------------------------------------------------------------
for tool in patchelf xz ldd tar readelf objdump sha256sum; do
  command -v "${tool}" >/dev/null || die "missing tool ${tool} (Debian: apt-get install patchelf xz-utils binutils)"
done
[[ $(uname -m) == x86_64 ]] || die "only x86_64 hosts are supported (this is $(uname -m))"

need() { [[ -e $1 ]] || die "missing $1${2:+ ($2)}"; }
need /usr/bin/bazel-4 "apt-get install bazel-bootstrap"
need /usr/share/bazel/A-server.jar "apt-get install bazel-bootstrap-data"
need /usr/share/bazel/rules/java/WORKSPACE "apt-get install bazel-rules-java"
need /usr/share/bazel/tools/platforms/WORKSPACE "apt-get install bazel-platforms"
for h in "${helpers[@]}"; do need "/usr/libexec/${multiarch}/bazel/${h}" "apt-get install bazel-bootstrap"; done
profiler="$(readlink -f /usr/share/bazel/libcpu_profiler.so || true)"
[[ -f $profiler ]] || die "missing libcpu_profiler.so (the install base's link points nowhere)"
need "${jdk}/bin/jlink" "set BUNDLE_JDK to a JDK 17, e.g. apt-get install openjdk-17-jdk-headless"
for m in ${modules//,/ }; do need "${jdk}/jmods/${m}.jmod" "the JDK at ${jdk} has no jmods"; done

installed="$(dpkg-query -W -f='${Version}' bazel-bootstrap 2>/dev/null || true)"
[[ $installed == "${want_version}"* ]] ||
  die "bazel-bootstrap ${installed:-?} is installed, .bazelversion wants ${want_version}"
jdk_version="$("${jdk}/bin/java" -version 2>&1 | head -n1)"
[[ $jdk_version == *'"17.'* ]] || die "BUNDLE_JDK=${jdk} is not Java 17: ${jdk_version}"

stage="$(mktemp -d "${TMPDIR:-/tmp}/bazel-bundle.XXXXXX")"
trap 'rm -rf "${stage}" "${out}.tmp.$$"' EXIT
b="${stage}/bundle"
mkdir -p "${b}/usr/bin" "${b}/usr/share" "${b}/usr/libexec/${multiarch}" "${b}/usr/lib/${multiarch}/bazel" "${b}/opt"

# --- Bazel --------------------------------------------------------------------------------------
echo "make_bazel_bundle: copying Bazel ${installed}" >&2
cp -p /usr/bin/bazel-4 "${b}/usr/bin/"
cp -a /usr/share/bazel "${b}/usr/share/"
cp -a "/usr/libexec/${multiarch}/bazel" "${b}/usr/libexec/${multiarch}/"
cp -p "${profiler}" "${b}/usr/lib/${multiarch}/bazel/libcpu_profiler.so"
# Everything in the install base must resolve inside the bundle (Debian's links are relative).
while IFS= read -r -d '' link; do
  target="$(readlink -f "${link}" || true)"
  [[ -e $target && $target == "${b}/"* ]] ||
    die "${link#"${b}"/} -> $(readlink "${link}") does not resolve inside the bundle"
done < <(find "${b}/usr/share/bazel" -type l -print0)

# --- Java runtime -------------------------------------------------------------------------------
echo "make_bazel_bundle: jlink ${jdk_version} (${modules})" >&2
"${jdk}/bin/jlink" --module-path "${jdk}/jmods" --add-modules "${modules}" \
  --strip-debug --no-man-pages --no-header-files --compress=2 --output "${b}/opt/minjre"

# --- Shared libraries ---------------------------------------------------------------------------
# Everything ldd finds that is not glibc (glibc must come from the host: it is tied to its
# dynamic loader) and not already in the bundle.
readonly glibc_re='^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|libnsl|libnss_[a-z0-9_]+|libBrokenLocale|libthread_db|libc_malloc_debug|libmemusage|libpcprofile|linux-vdso)\.so(\.[0-9]+)*$'
libdir="${b}/usr/lib/${multiarch}"
jre_paths="${b}/opt/minjre/lib:${b}/opt/minjre/lib/server"
elves=(
  "${b}/usr/bin/bazel-4"
  "${b}/usr/libexec/${multiarch}/bazel/"*
  "${libdir}/bazel/libcpu_profiler.so"
  "${b}/opt/minjre/bin/"*
)
mapfile -t jre_libs < <(find "${b}/opt/minjre" -name '*.so' -type f | sort)
elves+=("${jre_libs[@]}")
declare -A libs=()
for elf in "${elves[@]}"; do
  ldd_out="$(LD_LIBRARY_PATH="${jre_paths}" ldd "${elf}" 2>&1)" || die "ldd ${elf#"${b}"/} failed: ${ldd_out}"
  if grep -q 'not found' <<<"${ldd_out}"; then
    die "${elf#"${b}"/} needs a library this host lacks:"$'\n'"$(grep 'not found' <<<"${ldd_out}")"
  fi
  while read -r name arrow path _; do
    [[ $arrow == '=>' && $path == /* ]] || continue
    [[ $name =~ $glibc_re || $path == "${b}/"* ]] && continue
    libs["${name}"]="${path}"
  done <<<"${ldd_out}"
done
((${#libs[@]})) || die "ldd found no libraries to bundle: is /usr/bin/bazel-4 Debian's dynamic client?"
for name in "${!libs[@]}"; do
  cp -L "${libs[${name}]}" "${libdir}/${name}"
  chmod 0644 "${libdir}/${name}"
done

# --- RPATHs -------------------------------------------------------------------------------------
# DT_RPATH (not RUNPATH) so that it also covers the libraries' own dependencies.
setrpath() { patchelf --force-rpath --set-rpath "$1" "$2" || die "patchelf failed on ${2#"${b}"/}"; }
setrpath '$ORIGIN/../lib/x86_64-linux-gnu' "${b}/usr/bin/bazel-4"
for h in "${helpers[@]}"; do
  setrpath '$ORIGIN/../../../lib/x86_64-linux-gnu' "${b}/usr/libexec/${multiarch}/bazel/${h}"
done
setrpath '$ORIGIN/..' "${libdir}/bazel/libcpu_profiler.so"
# The JVM launcher: keep its own $ORIGIN entries, add the bundle's libraries (libjvm.so and the JDK's
# libraries use DT_RPATH, so the executable's RPATH applies to their dependencies too).
for exe in "${b}/opt/minjre/bin/"*; do
  old="$(patchelf --print-rpath "${exe}")"
  setrpath "${old:+${old}:}\$ORIGIN/../../../usr/lib/x86_64-linux-gnu" "${exe}"
done
# A bundled library with a RUNPATH of its own would not see the executable's RPATH.
for lib in "${libdir}"/*.so*; do
  if readelf -d "${lib}" | grep -q '(RUNPATH)'; then setrpath '$ORIGIN' "${lib}"; fi
done

# --- Check: with an empty environment, every non-glibc library resolves inside the bundle -------
for elf in "${b}/usr/bin/bazel-4" "${b}/usr/libexec/${multiarch}/bazel/"* "${b}/opt/minjre/bin/java"; do
  while read -r name arrow path _; do
    [[ $arrow == '=>' ]] || continue
    [[ $name =~ $glibc_re || $path == "${b}/"* ]] ||
      die "${elf#"${b}"/}: ${name} resolves to ${path}, not into the bundle"
  done < <(env -i ldd "${elf}")
done
env -i "${b}/opt/minjre/bin/java" -version >/dev/null 2>&1 || die "the bundled java does not start"
env -i "${b}/usr/bin/bazel-4" --version >/dev/null 2>&1 || die "the bundled client does not start"

min_glibc="$(for f in "${b}/usr/bin/bazel-4" "${b}/usr/libexec/${multiarch}/bazel/"* "${libdir}"/*.so* \
  "${libdir}/bazel/libcpu_profiler.so" "${b}/opt/minjre/bin/"* "${jre_libs[@]}"; do
  objdump -T "${f}" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' || true
done | sort -uV | tail -n1)"

{
  echo "bazel_bootstrap=${installed}"
  echo "java_runtime=${jdk_version}"
  echo "java_modules=${modules}"
  echo "min_glibc=${min_glibc#GLIBC_}"
  echo "arch=x86_64"
  echo "built_on=$(. /etc/os-release && echo "${PRETTY_NAME}")"
  echo "libraries=$(printf '%s\n' "${!libs[@]}" | sort | tr '\n' ' ')"
} >"${b}/BUNDLE_INFO"

# --- Pack ---------------------------------------------------------------------------------------
unpacked="$(du -sb "${b}" | cut -f1)"
echo "make_bazel_bundle: packing $((unpacked / 1048576)) MiB with xz ${xz_opts[*]}" >&2
tar -C "${b}" --sort=name --owner=0 --group=0 --numeric-owner -cf - . |
  xz "${xz_opts[@]}" >"${out}.tmp.$$"
mv -f "${out}.tmp.$$" "${out}"
packed="$(stat -c %s "${out}")"
printf 'make_bazel_bundle: wrote %s: %d MiB (%d bytes), %d MiB unpacked, sha256 %s\n' \
  "${out}" $((packed / 1048576)) "${packed}" $((unpacked / 1048576)) "$(sha256sum "${out}" | cut -c1-16)"
