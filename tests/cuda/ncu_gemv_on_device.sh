#!/usr/bin/env bash
# On a GPU machine, from tests/cuda/carry_all.sh's folder (after all_on_device.sh unpacked
# it, or unpacking it here): ncu's full sections for chosen decode GEMV kernels, each in
# its memra-kernel-check --bench run (the Qwen3-8B shapes, caches as the bench leaves
# them), with the per-instruction SASS table where this ncu prints one. What limits a
# kernel (stall reasons, bytes in flight, DRAM throughput) is read from these.
# Usage: tests/cuda/ncu_gemv_on_device.sh <carried folder> <tag> <bench flags> <kernel-name regex>...
#   e.g. ncu_gemv_on_device.sh .device/all q4k '--bench --filter q4_k' memra_gemv8_q4_km2_r16_t8 memra_gemv8_q4_k2_r4_t8
# Output: $OUT/ncu-<tag>.tar.gz: per kernel n, <n>.txt (details page) and <n>-sass.csv (source page).
set -u
D=$(readlink -f "${1:?carried folder}")
TAG=${2:?tag}
FLAGS=$3
shift 3
OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
W=$(mktemp -d)
trap 'tar czf "$OUT/ncu-$TAG.tar.gz" -C "$W" .' EXIT
[ -x "$D/bin/memra-kernel-check" ] || tar xJf "$D/bin.tar.xz" -C "$D"
S=$(mktemp -d); tar xJf "$D/syslib.tar.xz" -C "$S"
export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
command -v ncu > /dev/null || { echo "ncu: not on this machine"; exit 0; }
n=0
for k in "$@"; do
  n=$((n + 1))
  R=$(mktemp -d)/rep
  # Skip the timer's warm-up launches of the first configuration; one launch profiled.
  # shellcheck disable=SC2086
  timeout 240 ncu --kernel-name "regex:$k" --launch-skip 4 --launch-count 1 --set full --import-source no \
    -o "$R" "$D/bin/memra-kernel-check" $FLAGS > "$W/$n.log" 2>&1
  echo "== $k rc=$?"
  ncu -i "$R.ncu-rep" --page details > "$W/$n.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Block Limit|L1/TEX Hit|L2 Hit|Grid Size|Block Size" "$W/$n.txt" | head -30
  ncu -i "$R.ncu-rep" --page source --csv --print-source sass > "$W/$n-sass.csv" 2>&1 || echo "(no source page)"
done
