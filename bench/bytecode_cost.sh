#!/usr/bin/env bash
# What bytecode in a PYTHONPYCACHEPREFIX (tools/runner/bytecode.py) saves a test process whose
# interpreter's torch ships no .pyc (the GPU image): wall of `import torch`, of inductor's CPU
# vector-ISA check (child processes that import torch) and of the process's first inductor
# compile after it (a small CPU function; the kernel cache warmed first, so what is left is
# mostly Python compiling torch's and inductor's sources). Three conditions, fresh processes:
#   none        PYTHONDONTWRITEBYTECODE=1 (the image's default; no cache)
#   cold-cache  PYTHONPYCACHEPREFIX on an empty folder (the first test of a cold host)
#   warm-cache  the same folder again (every later test)
# Writes RESULTS_DIR/bytecode_cost.tsv.
# Usage: bench/bytecode_cost.sh [PYTHON] [RUNS]   (default: $TORCH_TEST_PYTHON or python3, 2)
source "$(dirname "$0")/lib.sh"
python="${1:-${TORCH_TEST_PYTHON:-$(command -v python3)}}"
runs="${2:-2}"
RESULTS_FILE="${RESULTS_DIR}/bytecode_cost.tsv"
: >"$RESULTS_FILE"
scratch="$(mktemp -d /tmp/bytecode_cost.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
export TORCHINDUCTOR_CACHE_DIR="${scratch}/inductor" TRITON_CACHE_DIR="${scratch}/triton"
# Outside the rows nothing writes bytecode next to torch's sources: that would give the "none"
# rows the bytecode they are meant to lack.
export PYTHONDONTWRITEBYTECODE=1

probe='
import time
start = time.monotonic()
import torch
imported = time.monotonic()
from torch._inductor import cpu_vec_isa
cpu_vec_isa.pick_vec_isa()
checked = time.monotonic()
torch.compile(lambda x: (x * 2).sin() + 1)(torch.randn(64))
print(f"{imported - start:.2f} {checked - imported:.2f} {time.monotonic() - checked:.2f}")
'
# one_run CONDITION ENV...: one fresh process under ENV, its three walls as a row.
one_run() {
  local condition="$1"
  shift
  table_row "$condition" $(env -u PYTHONDONTWRITEBYTECODE -u PYTHONPYCACHEPREFIX "$@" \
    "$python" -c "$probe" 2>/dev/null | tail -n 1)
}

"$python" -c 'import torch; print("torch", torch.__version__)' | tee -a "$RESULTS_FILE"
# Warms the kernel cache (and the ISA checks' builds) so that no row pays a C++ compile.
"$python" -c "$probe" >/dev/null 2>&1
table_row condition import_torch_s vec_isa_check_s first_compile_s
for _ in $(seq "$runs"); do one_run none PYTHONDONTWRITEBYTECODE=1; done
one_run cold-cache PYTHONPYCACHEPREFIX="${scratch}/bytecode"
for _ in $(seq "$runs"); do one_run warm-cache PYTHONPYCACHEPREFIX="${scratch}/bytecode"; done
