#!/usr/bin/env bash
# Compile-only AMDGCN check: every variant for gfx942 (wave64) and gfx1100 (wave32),
# with numba-hip, on a machine with no AMD GPU. Nothing runs on AMD hardware.
# Sets up the amdgcn-check toolchain first if needed (../shared/tools/amdgcn-check,
# ~1.1 GB under /tmp, needs apt-get and pip access), then runs compile_variants.py.
#
# Usage: tests/amdgcn/run.sh [OUT]        (default OUT: build/amdgcn in the checkout)
# Environment: AMDGCN_CHECK_TOOL (default ../shared/tools/amdgcn-check next to the
# checkout), AMDGCN_CHECK_ROOT (default /tmp/amdgcn-check). Extra arguments for
# compile_variants.py go in AMDGCN_CHECK_ARGS (e.g. "--keep-asm").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$(pwd)
TOOL=${AMDGCN_CHECK_TOOL:-$REPO/../shared/tools/amdgcn-check}
CHECK_ROOT=${AMDGCN_CHECK_ROOT:-/tmp/amdgcn-check}
OUT=${1:-$REPO/build/amdgcn}
if [ ! -x "$TOOL/setup.sh" ]; then
    echo "amdgcn-check tool not found at $TOOL (set AMDGCN_CHECK_TOOL)" >&2
    exit 2
fi
start=$SECONDS
if [ ! -f "$CHECK_ROOT/env.sh" ]; then
    "$TOOL/setup.sh" "$CHECK_ROOT"
fi
setup=$((SECONDS - start))
# shellcheck disable=SC1091
source "$CHECK_ROOT/env.sh"
# shellcheck disable=SC2086
PYTHONPATH="$REPO:$TOOL${PYTHONPATH:+:$PYTHONPATH}" \
    python "$REPO/tests/amdgcn/compile_variants.py" --out "$OUT" ${AMDGCN_CHECK_ARGS:-}
echo "amdgcn check: setup ${setup}s, total $((SECONDS - start))s; results in $OUT"
