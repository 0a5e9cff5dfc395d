#!/usr/bin/env bash
# memra-bench on a GPU machine from a carried build: Qwen3-8B-shaped random weights,
# decode tok/s at batch 1/4/16 and % of the memory roofline, for a few schemes.
# Usage: tests/cuda/bench_on_device.sh <build-dir> [<older-backend-dir> ...] ; logs into $OUT.
set -u
BUILD=${1:-.device/build}
shift || true
OUT=${OUT:-./device-logs}
mkdir -p "$OUT"
export MEMRA_HOME=${MEMRA_HOME:-$(mktemp -d)}
for q in ${BENCH_QUANTS:-bf16 q4_k q8_0}; do
  echo "== $q (this build)"
  "$BUILD/bin/memra-bench" --quant "$q" 2>&1 | grep -v "plugin loaded" | tee -a "$OUT/bench.log"
  for old in "$@"; do
    echo "== $q (backend from $old)"
    MEMRA_CUDA_BACKEND="$old/lib/memra/libmemra-backend-cuda.so" "$BUILD/bin/memra-bench" --quant "$q" 2>&1 | grep -v "plugin loaded" | tee -a "$OUT/bench.log"
  done
done
