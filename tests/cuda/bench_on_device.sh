#!/usr/bin/env bash
# memra-bench on a GPU machine from a carried build: Qwen3-8B-shaped random weights,
# decode tok/s at batch 1/4/16 and % of the memory roofline, for a few schemes,
# eagerly and with step graphs (MEMRA_CUDA_GRAPH=1).
# Usage: tests/cuda/bench_on_device.sh <build-dir> [<older-backend-dir> ...] ; logs into $OUT.
# Env: BENCH_QUANTS (default "bf16 q4_k q8_0"), BENCH_GRAPH (default "0 1"), BENCH_ARGS (extra memra-bench options).
set -u
BUILD=${1:-.device/build}
shift || true
OUT=${OUT:-./device-logs}
mkdir -p "$OUT"
export MEMRA_HOME=${MEMRA_HOME:-$(mktemp -d)}
for q in ${BENCH_QUANTS:-bf16 q4_k q8_0}; do
  for g in ${BENCH_GRAPH:-0 1}; do
    echo "== $q MEMRA_CUDA_GRAPH=$g (this build)" | tee -a "$OUT/bench.log"
    MEMRA_CUDA_GRAPH=$g "$BUILD/bin/memra-bench" --quant "$q" ${BENCH_ARGS:-} 2>&1 | grep -v "plugin loaded" | tee -a "$OUT/bench.log"
  done
  for old in "$@"; do
    echo "== $q (backend from $old)" | tee -a "$OUT/bench.log"
    MEMRA_CUDA_BACKEND="$old/lib/memra/libmemra-backend-cuda.so" "$BUILD/bin/memra-bench" --quant "$q" ${BENCH_ARGS:-} 2>&1 | grep -v "plugin loaded" | tee -a "$OUT/bench.log"
  done
done
