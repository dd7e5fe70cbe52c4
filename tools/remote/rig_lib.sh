# Helpers shared by tools/remote/*.sh. Source it; defines functions only.

rig_die() { echo "rig: $*" >&2; exit 2; }

# rig_setting NAME: $NAME if set, else its value in tools/remote/rig.conf (the one place).
rig_setting() {
  local value="${!1:-}"
  [[ -n $value ]] || value="$(sed -n "s/^$1=//p" "$(dirname "${BASH_SOURCE[0]}")/rig.conf")"
  [[ -n $value ]] || rig_die "no $1 in tools/remote/rig.conf"
  echo "$value"
}

# find_python: a Python >= 3.13 for BuildGrid 0.9.1: $RIG_PYTHON, else python3.1x on PATH, else
# the newest pyenv 3.13+ install.
find_python() {
  local candidates=() c
  if [[ -n ${RIG_PYTHON:-} ]]; then
    candidates=("$RIG_PYTHON")
  else
    for c in python3.14 python3.13; do
      command -v "$c" >/dev/null && candidates+=("$(command -v "$c")")
    done
    for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]* 2>/dev/null | sort -rV); do
      candidates+=("$c/bin/python3")
    done
  fi
  for c in "${candidates[@]}"; do
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 13))' 2>/dev/null; then
      echo "$c"
      return
    fi
  done
  rig_die "BuildGrid 0.9.1 needs Python >= 3.13; none found (tried: ${candidates[*]:-nothing}). Set RIG_PYTHON."
}

# rig_auth_header NAME: Bazel's flag sending the rig's NAME credential (dev, ci; rig.sh up
# writes them under $RIG_DIR/auth).
rig_auth_header() { echo "--remote_header=authorization=Bearer $(<"${RIG_DIR}/auth/$1.token")"; }

# port_open PORT: is something listening on 127.0.0.1:PORT?
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_daemon NAME LOG CMD...: runs CMD in its own session (so `down` can end its whole
# process group), records its pid in $RIG_DIR/run/NAME.pid.
start_daemon() {
  local name="$1" log="$2"
  shift 2
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "${RIG_DIR}/run/${name}.pid" "$@" >>"$log" 2>&1 </dev/null &
  local i
  for i in $(seq 50); do [[ -s ${RIG_DIR}/run/${name}.pid ]] && return; sleep 0.1; done
  rig_die "${name} did not start; see ${log}"
}

# stop_daemon NAME: TERM to the process group recorded for NAME, KILL after 10 s.
stop_daemon() {
  local pidfile="${RIG_DIR}/run/$1.pid" pid i
  [[ -s $pidfile ]] || return 0
  pid="$(<"$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "rig: $1 (pid $pid) ignored SIGTERM for 10 s; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

# rig_venv: BuildGrid's virtualenv: $RIG_VENV, else one per lock content under
# ~/.cache/torch_tests (checkouts with different locks, e.g. two branches, never clobber each
# other's running rig).
rig_venv() {
  local lock="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/requirements.lock"
  echo "${RIG_VENV:-$HOME/.cache/torch_tests/buildgrid-$(sha256sum "$lock" | cut -c1-12)}"
}
