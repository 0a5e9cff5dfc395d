#!/usr/bin/env bash
# On a GPU machine, from tests/cuda/carry_all.sh's folder: the decode-attention gates and
# figures in one call. memra-kernel-check --filter attention, then memra-bench decode at
# depth 0 and 4096 (bf16 KV: bf16 and q4_k weights; then f32 KV), then the fixture oracles
# and the CUDA instances of the speculative / pipeline suites. A `base.tar.xz` beside the
# carried files (base/bin/memra-bench + base/lib/memra of an earlier commit) runs every
# bench on that build too, right after the current one: before/after on the same card.
# Logs go straight to $OUT (a call cut short still returns what ran); summary: $OUT/summary.txt.
# Usage: tests/cuda/attention_on_device.sh [<carried folder>=.device/attn]
set -u
D=$(readlink -f "${1:-.device/attn}")
OUT=${OUT:-./device-logs}; mkdir -p "$OUT/logs"
L=$OUT/logs; R=$OUT/summary.txt
S=$(mktemp -d); tar xJf "$D/syslib.tar.xz" -C "$S"
for t in bin fixtures base; do [ -f "$D/$t.tar.xz" ] && tar xJf "$D/$t.tar.xz" -C "$D"; done
export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
export MEMRA_FIXTURES_DIR=$D/fixtures NCCL_NVLS_ENABLE=0
say() { echo "$@" | tee -a "$R"; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$R"
timeout 150 "$D/bin/memra-kernel-check" --filter attention > "$L/kernel-check.log" 2>&1
say "memra-kernel-check --filter attention rc=$? $(tail -1 "$L/kernel-check.log")"
grep -E "^FAIL" "$L/kernel-check.log" | head -10 | tee -a "$R"
bench() {  # <label> <bin dir> args...
  local label=$1 bin=$2; shift 2
  say "== $label memra-bench $*"
  timeout 120 "$bin/memra-bench" "$@" 2>&1 | tee -a "$L/bench-$label.log" | grep -E "^(pp|tg|copy|peak)" | tee -a "$R"
}
benches() {  # args...
  bench new "$D/bin" "$@"
  [ -d "$D/base/bin" ] && bench base "$D/base/bin" "$@"
}
benches --quant bf16 --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --kv-dtype bf16
benches --quant q4_k --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --kv-dtype bf16
run_test() {  # <binary> <log name> [gtest args...]
  local t=$1 log=$2; shift 2
  timeout 180 "$D/bin/$t" "$@" > "$L/$log.log" 2>&1
  say "$log rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/$log.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" "$L/$log.log" | head -5 | tee -a "$R"
}
run_test cuda_fixture_test cuda_fixture_test
for t in engine_fixture_test engine_speculative_test engine_speculative_scheduler_test engine_pipeline_test engine_pipeline_serving_test; do
  run_test "$t" "$t" --gtest_filter='*/cuda*'
done
run_test cuda_pipeline_test cuda_pipeline_test
benches --quant bf16 --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --kv-dtype f32
