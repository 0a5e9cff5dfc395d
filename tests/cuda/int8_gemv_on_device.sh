#!/usr/bin/env bash
# The integer-activation GEMVs on a GPU machine, in one call: memra-kernel-check's int8
# checks (fresh seed each run), the --bench table, and the SASS of the kernels timed.
# Carry (git-ignored, ~10 MB): tests/cuda/int8_gemv_carry.sh <build-dir> [.device/q8].
# Usage: tests/cuda/int8_gemv_on_device.sh [<carried dir>=.device/q8] [check|bench|all=all]
set -u
D=${1:-.device/q8}
WHAT=${2:-all}
OUT=${OUT:-./device-logs}
mkdir -p "$OUT"
export MEMRA_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
rc=0
if [ "$WHAT" != bench ]; then
  SEED=$(( $(date +%s) % 1000000007 ))
  echo "== memra-kernel-check --filter int8 --seed $SEED"
  "$D/bin/memra-kernel-check" --filter int8 --seed "$SEED" > "$OUT/int8-check.log" 2>&1 || rc=1
  cat "$OUT/int8-check.log"
fi
if [ "$WHAT" != check ]; then
  echo "== memra-kernel-check --bench"
  "$D/bin/memra-kernel-check" --bench > "$OUT/int8-bench.log" 2>&1 || rc=1
  grep -v "^cfg " "$OUT/int8-bench.log"  # every configuration's time stays in the log
  # What the compiler made of the kernels (counts of the instructions that matter).
  for f in "$D"/lib/memra/kernels/matmul8_*.fatbin; do
    mkdir -p /tmp/int8-sass && cuobjdump -sass "$f" > "/tmp/int8-sass/$(basename "$f" .fatbin).sass" 2>&1 || true
  done
  for k in ${SASS_KERNELS:-memra_gemv8_q8_0_r2_t1 memra_gemv8_q4_k_r2_t1 memra_gemv8_q4_k2_r2_t8 memra_gemv8_q4_k_r2_t8}; do
    f="/tmp/int8-sass/matmul8_$(echo "$k" | sed -E 's/memra_gemv8_(iq4_xs|q[0-9]_[0-9k]).*/\1/').sass"
    awk -v k="$k" '/Function : /{on = ($3 == k)} on' "$f" | grep -v "^\s*$" > "$OUT/$k.sass.txt"
    echo "sass $k: $(grep -c 'LDG.E.128\|LDG.E.ENL2.128\|LDG.E.NA.128\|LDG.*128' "$OUT/$k.sass.txt") LDG.128, $(grep -c 'IDP.4A' "$OUT/$k.sass.txt") IDP.4A, $(grep -c ' LDS' "$OUT/$k.sass.txt") LDS, $(grep -c 'SHFL' "$OUT/$k.sass.txt") SHFL, $(grep -c 'LDL\|STL' "$OUT/$k.sass.txt") local, $(wc -l < "$OUT/$k.sass.txt") lines"
  done
fi
exit $rc
