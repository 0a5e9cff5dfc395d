#!/usr/bin/env bash
# Runs the CUDA checks on a GPU machine from a carried build (see tests/cuda/README
# notes in the lead's report): memra-kernel-check, then the tests/cuda suites and the
# fixture oracles on both backends (engine_fixture_test), logs into $OUT (or ./device-logs). Usage: tests/cuda/run_on_device.sh <build-dir> <fixtures-dir>
set -u
BUILD=${1:-.device/build}
export MEMRA_FIXTURES_DIR=$(readlink -f "${2:-.device/fixtures}")
OUT=${OUT:-./device-logs}
mkdir -p "$OUT"
export MEMRA_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv > "$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt"
rc=0
"$BUILD/bin/memra-kernel-check" > "$OUT/kernel-check.log" 2>&1 || rc=1
grep -E "^(FAIL|device|ALL GREEN|FAILED|SKIPPED)" "$OUT/kernel-check.log" | head -40
tail -1 "$OUT/kernel-check.log"
for t in cuda_fatbin_test cuda_kernels_test cuda_fixture_test engine_fixture_test; do
  "$BUILD/bin/$t" > "$OUT/$t.log" 2>&1 || rc=1
  echo "== $t: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$t.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|^\[ [A-Za-z0-9_]+ \] |Failure|rror" "$OUT/$t.log" | head -30
done
# The model fixtures again with eager launches (step graphs are the default): both
# must match transformers and keep every invariance the test checks.
for t in cuda_fixture_test engine_fixture_test; do
  MEMRA_CUDA_GRAPH=0 "$BUILD/bin/$t" --gtest_filter='CudaFixture.*:*/cuda*' > "$OUT/${t}_eager.log" 2>&1 || rc=1
  echo "== $t (MEMRA_CUDA_GRAPH=0): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/${t}_eager.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|rror" "$OUT/${t}_eager.log" | head -30
done
exit $rc
