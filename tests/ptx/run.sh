#!/usr/bin/env bash
# Compile-only PTX check (tests/ptx/compile_kernels.py): every kind of CUDA kernel
# pyreduce generates, typed and compiled by numba-cuda and NVVM for a compute
# capability, on a machine with no GPU. Needs NVVM and NVRTC: installs the CUDA 13
# toolkit wheels that provide them into the active environment if they are not
# found. Runs in JOBS processes (default 2). Usage: tests/ptx/run.sh [extra args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if ! python -c "from cuda.pathfinder import load_nvidia_dynamic_lib as l; l('nvvm'); l('nvrtc')" \
        >/dev/null 2>&1; then
    pip install --quiet "cuda-toolkit[nvrtc,nvvm]==13.*"
fi
JOBS=${JOBS:-2}
pids=()
for ((i = 0; i < JOBS; i++)); do
    python tests/ptx/compile_kernels.py --shard "$i/$JOBS" "$@" > "${TMPDIR:-/tmp}/ptx-check-$i.log" 2>&1 &
    pids+=($!)
done
status=0
for ((i = 0; i < JOBS; i++)); do
    log="${TMPDIR:-/tmp}/ptx-check-$i.log"
    if wait "${pids[$i]}"; then
        grep -E "^(FAILED|refused)|kernels," "$log" || true
    else
        status=1
        grep -E "^FAILED" "$log" || tail -20 "$log"
    fi
done
exit $status
