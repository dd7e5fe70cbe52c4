#!/usr/bin/env bash
# Packs what the loopback rig needs on a host with no package index (a lent GPU machine: Python
# 3.12, no PostgreSQL, Redis, bubblewrap or pip index) into one archive the device tool can carry:
#   site/   BuildGrid 0.9.1's closure, the versions of tools/remote/requirements.lock, as cp312
#           wheels installed with --ignore-requires-python (BuildGrid declares >= 3.13; the
#           rig runs on 3.12; tools/remote/README.md), all of them: BuildGrid's commands import
#           boto3 and sentry_sdk even where they are not configured
#   root/   this host's PostgreSQL server tree, redis-server and bwrap, with every shared library
#           they load except glibc's and the C++ runtime (the GPU image has newer ones) in
#           root/usr/lib/rig, found through a RUNPATH relative to each binary (patchelf), so
#           nothing needs LD_LIBRARY_PATH (which bwrap would hand on to every test)
# Runs here (Debian 12, root, apt's postgresql-15, redis-server, bubblewrap, patchelf, xz).
#
# Usage: tools/remote/gpu_host/pack.sh [OUT_DIR]    (default: .rig_gpu, git-ignored)
# Environment: RIG_PACK_PYTHON  a Python 3.12 to install the wheels with
#              (default: pyenv's newest 3.12)
#              RIG_PACK_MAX_KIB  fail above this size (default 61440: 60 MiB, which leaves a
#              device call room for the working tree and .wheels)
set -euo pipefail
readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
readonly out="${1:-${root}/.rig_gpu}"
readonly lock="${root}/tools/remote/requirements.lock"

die() { echo "pack: $*" >&2; exit 2; }

python="${RIG_PACK_PYTHON:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.* 2>/dev/null | sort -V | tail -1)/bin/python3}"
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null ||
  die "need a Python 3.12 for cp312 wheels (set RIG_PACK_PYTHON)"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[[ -n $pg_bin ]] || die "no PostgreSQL server here (apt-get install postgresql)"
pg_version="$(basename "$(dirname "$pg_bin")")"
for tool in patchelf xz /usr/bin/redis-server /usr/bin/bwrap; do
  command -v "$tool" >/dev/null || die "missing ${tool} (apt-get install patchelf xz-utils redis-server bubblewrap)"
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# 1. BuildGrid's closure for cp312. The lock's hashes are of the cp313 wheels it was made for;
# the same versions are installed here by name (pip checks nothing else of them).
grep -o '^[A-Za-z0-9_.-]*==[^ ]*' "$lock" >"${stage}/pins.txt"
"$python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --ignore-requires-python --no-compile --target "${stage}/site" -r "${stage}/pins.txt"
rm -rf "${stage}/site/bin"
find "${stage}/site" -name __pycache__ -prune -exec rm -rf {} +

# 2. Binaries, keeping Debian's layout (PostgreSQL finds its share/ and lib/ relative to bin/).
r="${stage}/root"
mkdir -p "${r}/usr/bin" "${r}/usr/lib/rig" "${r}/usr/lib/postgresql/${pg_version}/bin" "${r}/usr/share/postgresql"
for b in postgres initdb pg_ctl createdb; do cp -a "${pg_bin}/${b}" "${r}/usr/lib/postgresql/${pg_version}/bin/"; done
cp -a "/usr/lib/postgresql/${pg_version}/lib" "${r}/usr/lib/postgresql/${pg_version}/"
rm -rf "${r}/usr/lib/postgresql/${pg_version}/lib/"{bitcode,llvmjit*} # JIT is off (up.sh)
cp -a "/usr/share/postgresql/${pg_version}" "${r}/usr/share/postgresql/"
# -L: Debian's redis-server is a link to redis-check-rdb, which picks its role by its name.
cp -L /usr/bin/redis-server /usr/bin/bwrap "${r}/usr/bin/"

# 3. Their libraries, but not glibc's (ld.so must match libc) nor the C++/gcc runtime.
is_base_lib() { [[ $1 =~ ^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so ]]; }
mapfile -t elves < <(find "$r" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
for elf in "${elves[@]}"; do
  ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  is_base_lib "$name" || cp -L "$path" "${r}/usr/lib/rig/${name}"
done
mapfile -t elves < <(find "$r" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
for elf in "${elves[@]}"; do
  rel="$(realpath --relative-to="$(dirname "$elf")" "${r}/usr/lib/rig")"
  chmod u+w "$elf"
  patchelf --set-rpath "\$ORIGIN/${rel}" "$elf"
done
# A check here, with no library path: every binary resolves every library.
for elf in "${elves[@]}"; do
  ! ldd "$elf" 2>&1 | grep -q 'not found' || die "${elf#"$r"/} misses a library: $(ldd "$elf" | grep 'not found')"
done

mkdir -p "$out"
rm -f "${out}"/rig-gpu.tar.xz
tar -C "$stage" --owner=0 --group=0 -cf - site root | xz -T0 -9 >"${out}/rig-gpu.tar.xz.tmp"
mv "${out}/rig-gpu.tar.xz.tmp" "${out}/rig-gpu.tar.xz"
# A device call carries at most 64 MiB in all: this archive, the working tree (~1.5 MiB) and
# .wheels go in one call, the Bazel bundle (~37 MiB) in the next (run_remote_gpu.sh).
size_kib="$(du -k "${out}/rig-gpu.tar.xz" | cut -f1)"
((size_kib <= ${RIG_PACK_MAX_KIB:-61440})) ||
  die "${out}/rig-gpu.tar.xz is ${size_kib} KiB, over ${RIG_PACK_MAX_KIB:-61440} KiB: it would not fit one device call"
echo "pack: ${out}/rig-gpu.tar.xz ${size_kib} KiB (PostgreSQL ${pg_version}, $(du -sh "${stage}/site" | cut -f1) of Python packages unpacked)"
