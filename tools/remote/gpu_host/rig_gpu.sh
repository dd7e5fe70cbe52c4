#!/usr/bin/env bash
# The loopback rig (tools/remote/rig.sh) on a GPU host with no package index, started from the
# archive tools/remote/gpu_host/pack.sh makes: the same BuildGrid, PostgreSQL, Redis, JWTs,
# watchdog and bubblewrap workers, but BuildGrid on the host's Python 3.12, the binaries from the
# archive, and workers for the pools this host's GPUs serve (host_pools.py: a cpu worker and one
# GPU worker whose actions see the NVIDIA devices and share the GPU lease folder).
#
#   tools/remote/gpu_host/rig_gpu.sh unpack   unpack the archive (once per archive content)
#   tools/remote/gpu_host/rig_gpu.sh up       unpack if needed, check bubblewrap, start the rig
#   tools/remote/gpu_host/rig_gpu.sh down|status
#
# Environment (besides rig.sh's):
#   RIG_GPU_PACK     the archive (default <workspace>/.rig_gpu/rig-gpu.tar.xz)
#   RIG_GPU_HOME     where it is unpacked (default /tmp/torch_tests_rig_gpu: PostgreSQL's user,
#                    not root, must reach its binaries, so not under root's home)
#   RIG_GPU_PYTHON   a Python 3.12 for BuildGrid (default python3 on PATH)
#   RIG_GPU_LISTING  a saved `nvidia-smi -L` instead of asking nvidia-smi (self-test; host_pools.py)
#   RIG_GPU_DEV      where the NVIDIA device nodes are (default /dev; self-test: a fake folder)
set -euo pipefail
readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
source "${root}/tools/remote/rig_lib.sh"
readonly pack="${RIG_GPU_PACK:-${root}/.rig_gpu/rig-gpu.tar.xz}"
readonly home="${RIG_GPU_HOME:-/tmp/torch_tests_rig_gpu}"
readonly python="${RIG_GPU_PYTHON:-$(command -v python3)}"
readonly dev="${RIG_GPU_DEV:-/dev}"
export PYTHONDONTWRITEBYTECODE=1

unpack() {
  [[ -f $pack ]] || rig_die "no archive at ${pack} (make it with tools/remote/gpu_host/pack.sh; carry .rig_gpu)"
  local sum
  sum="$(sha256sum "$pack" | cut -d' ' -f1)"
  [[ -f ${home}/.pack.sha256 && $(<"${home}/.pack.sha256") == "$sum" ]] && return
  "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' ||
    rig_die "${python} is not Python 3.12, which the archive's wheels are for (set RIG_GPU_PYTHON)"
  rm -rf "$home"
  mkdir -p "$home"
  chmod 755 "$home"
  tar -C "$home" --no-same-owner -xJf "$pack"
  # BuildGrid's venv: the host's interpreter, the archive's packages (a .pth), no others.
  local venv="${home}/venv"
  "$python" -m venv --without-pip "$venv"
  "${venv}/bin/python3" -c 'import site, sys; print(site.getsitepackages()[0])' >"${home}/.site"
  echo "${home}/site" >"$(<"${home}/.site")/rig-gpu.pth"
  cat >"${venv}/bin/bgd" <<PY
#!${venv}/bin/python3
import sys
from buildgrid.server.app import cli
sys.exit(cli())
PY
  chmod +x "${venv}/bin/bgd"
  # rig.sh's ensure_venv takes a venv stamped with its lock's hash as installed.
  sha256sum "${root}/tools/remote/requirements.lock" | cut -d' ' -f1 >"${venv}/.lock.sha256"
  "${venv}/bin/python3" -c 'import buildgrid.server.app.commands.cmd_server, buildgrid.server.app.commands.cmd_migrate, psycopg' ||
    rig_die "the archive's packages do not import on ${python}"
  echo "$sum" >"${home}/.pack.sha256"
  echo "rig_gpu: unpacked ${pack} into ${home}"
}

# The environment rig.sh runs with here: the archive's tools first on PATH, its venv, its
# PostgreSQL as `postgres` if that user exists, else `nobody`.
profile() {
  [[ -f ${home}/.pack.sha256 ]] || rig_die "nothing unpacked in ${home} (rig_gpu.sh unpack)"
  # runuser and mount live in sbin, which a non-login PATH may lack.
  export PATH="${home}/root/usr/bin:${PATH}:/usr/sbin:/sbin"
  export RIG_VENV="${home}/venv"
  RIG_PG_BIN="$(ls -d "${home}"/root/usr/lib/postgresql/*/bin | sort -V | tail -1)"
  export RIG_PG_BIN
  if [[ -z ${RIG_PG_USER:-} ]]; then
    if id postgres >/dev/null 2>&1; then RIG_PG_USER=postgres; else RIG_PG_USER=nobody; fi
  fi
  export RIG_PG_USER
  export RIG_WORKERS="${home}/workers.txt"
}

workers() {
  (cd "$root" && python3 -m tools.remote.gpu_host.host_pools workers --dev "$dev") \
    >"$RIG_WORKERS" || rig_die "no workers for this host (above)"
  RIG_EXTRA_POOLS="$(cd "$root" && python3 -m tools.remote.gpu_host.host_pools pools)"
  export RIG_EXTRA_POOLS
  echo "rig_gpu: workers (BuildGrid also takes ${RIG_EXTRA_POOLS}):"
  sed 's/^/  /' "$RIG_WORKERS"
}

# bubblewrap as the GPU worker runs it, with the device nodes, before anything starts.
check_sandbox() {
  local args
  args="$(cd "$root" && python3 -c 'import pathlib, sys
from tools.remote.worker.sandbox import gpu_exposure
print(" ".join(gpu_exposure(pathlib.Path(sys.argv[1]))))' "$dev")" || rig_die "no GPU devices to expose"
  # shellcheck disable=SC2086 # arguments without spaces, by construction
  bwrap --die-with-parent --unshare-pid --unshare-ipc --cap-drop ALL --ro-bind / / --dev /dev \
    --proc /proc --tmpfs /tmp $args -- sh -c 'ls /dev | grep nvidia | tr "\n" " "' >"${home}/sandbox_check.txt" 2>&1 ||
    rig_die "bubblewrap fails here: $(cat "${home}/sandbox_check.txt")"
  echo "rig_gpu: a sandbox sees: $(cat "${home}/sandbox_check.txt")"
}

case "${1:-}" in
  unpack) unpack ;;
  up)
    [[ -f $pack ]] && unpack
    profile
    workers
    check_sandbox
    exec "${root}/tools/remote/rig.sh" up
    ;;
  down | status)
    profile
    exec "${root}/tools/remote/rig.sh" "$1"
    ;;
  *) echo "usage: $0 unpack|up|down|status" >&2; exit 2 ;;
esac
