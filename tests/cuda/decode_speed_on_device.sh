#!/usr/bin/env bash
# One device call for the decode-step work (docs/PERFORMANCE.md, "Decode step: PDL, fused quantisation, merged GEMVs"),
# from tests/cuda/carry_all.sh's folder: memra-kernel-check (ALL GREEN or not, the
# fused-decode lines), the CUDA fixture oracles (graphs and eager), speculative identity,
# then memra-bench tg64 per scheme, and q4_k / bf16 again with MEMRA_CUDA_PDL=0 and
# MEMRA_CUDA_FUSE=1 (what each part gives; the fused path is off by default), and a per-kernel
# profile of q4_k and bf16 decode steps (MEMRA_CUDA_PROFILE). Summary: $OUT/summary.txt.
# Usage: tests/cuda/decode_speed_on_device.sh [<carried folder>=.device/dec] [checks|bench]
set -u
D=$(readlink -f "${1:-.device/dec}")
PART=${2:-}
OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
L=$(mktemp -d); R=$OUT/summary.txt
S=$(mktemp -d); tar xJf "$D/syslib.tar.xz" -C "$S"
[ -f "$D/bin.tar.xz" ] && tar xJf "$D/bin.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
export MEMRA_FIXTURES_DIR=$D/fixtures MEMRA_EXAMPLE_PLUGIN_DIR=$D/lib/sdk-example
say() { echo "$@" | tee -a "$R"; }
trap 'tar czf "$OUT/logs.tar.gz" -C "$L" . 2>/dev/null' EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$R"
run_test() {  # <binary> <log name> [gtest args...]
  local t=$1 log=$2; shift 2
  timeout 60 "$D/bin/$t" "$@" > "$L/$log.log" 2>&1
  say "$log rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/$log.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" "$L/$log.log" | head -5 | tee -a "$R"
}
if [ "$PART" != bench ]; then
  timeout 240 "$D/bin/memra-kernel-check" > "$L/kernel-check.log" 2>&1
  say "memra-kernel-check rc=$? $(tail -1 "$L/kernel-check.log")"
  grep -E "^FAIL" "$L/kernel-check.log" | head -10 | tee -a "$R"
  grep -E "fused decode|step graph" "$L/kernel-check.log" | head -20 | tee -a "$R"
  run_test cuda_fixture_test cuda_fixture_test
  run_test cuda_kernels_test cuda_kernels_test
  run_test engine_fixture_test engine_fixture_test --gtest_filter='*/cuda*'
  run_test engine_speculative_test engine_speculative_test --gtest_filter='*/cuda*'
  MEMRA_CUDA_GRAPH=0 run_test cuda_fixture_test cuda_fixture_test_eager
fi
[ "$PART" = checks ] && exit 0
bench() { say "== ${ENVS:-} memra-bench $*"; env ${ENVS:-} timeout 60 "$D/bin/memra-bench" "$@" 2>&1 | tee -a "$L/bench.log" |
          grep -E "^(pp|tg|copy)" | tee -a "$R"; }
G="--prompt-tokens 512 --gen-tokens 64"
bench --quant q8_0 $G
bench --quant q4_k $G
bench --quant bf16 $G
bench --quant q4_0 $G
ENVS="MEMRA_CUDA_PDL=0" bench --quant q4_k $G
ENVS="MEMRA_CUDA_FUSE=1" bench --quant q4_k $G
ENVS="MEMRA_CUDA_PDL=0" bench --quant bf16 $G
# Where a decode step's time goes (eager, per kernel; MEMRA_CUDA_PROFILE, docs/FLAGS.md).
for q in q4_k bf16; do
  say "== MEMRA_CUDA_PROFILE=1 memra-bench --quant $q --prompt-tokens 512 --gen-tokens 32 --repeats 1"
  MEMRA_CUDA_PROFILE=1 timeout 60 "$D/bin/memra-bench" --quant $q --prompt-tokens 512 --gen-tokens 32 --repeats 1 2>&1 |
    tee -a "$L/profile.log" | grep -E "^(tg|decode profile|  )" | head -30 | tee -a "$R"
done
