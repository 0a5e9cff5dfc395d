#!/usr/bin/env bash
# On a GPU machine (nvidia-h200), from tests/cuda/carry_all.sh's folder: the bf16 KV
# cache's checks and figures in one call (~100 s): memra-kernel-check's attention and
# step-graph checks, the fixture oracles' transformers and bf16-KV cases on CUDA, memra-gen CPU
# vs CUDA ids with each KV dtype, and memra-bench decode at depth 0 and 4096 with
# --kv-dtype bf16 and f32 (docs/PERFORMANCE.md, "bf16 KV cache"). Summary in
# $OUT/summary.txt, logs in $OUT/logs.
# Usage: tests/cuda/kv_dtype_on_device.sh [<carried folder>=.device/kv]
set -u
D=$(readlink -f "${1:-.device/kv}")
OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
L=$OUT/logs; mkdir -p "$L"; R=$OUT/summary.txt
S=$(mktemp -d); tar xJf "$D/syslib.tar.xz" -C "$S"
export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
export MEMRA_FIXTURES_DIR=$D/fixtures
say() { echo "$@" | tee -a "$R"; }
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s]"; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$R"
for f in attention "step graph"; do
  timeout 90 "$D/bin/memra-kernel-check" --filter "$f" > "$L/kernel-check-${f// /-}.log" 2>&1
  say "$(el) memra-kernel-check --filter '$f' rc=$? $(tail -1 "$L/kernel-check-${f// /-}.log")"
  grep -E "^FAIL" "$L/kernel-check-${f// /-}.log" | head -12 | cut -c1-250 | tee -a "$R"
done
for t in cuda_fixture_test engine_fixture_test; do
  timeout 60 "$D/bin/$t" --gtest_filter='CudaFixture.*Bf16*:*Bf16*/cuda:*MatchesTransformers/cuda' > "$L/$t.log" 2>&1
  say "$(el) $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/$t.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|bf16 KV:|bitwise equal" "$L/$t.log" | head -10 | tee -a "$R"
done
for kv in f32 bf16; do for be in cpu cuda; do
  timeout 30 "$D/bin/memra-gen" "$D/fixtures/models/llama" --prompt "The capital of France is" --max-tokens 12 \
    --backend $be --kv-dtype $kv --json > "$L/memra-gen-$be-$kv.log" 2>&1
  say "$(el) memra-gen --backend $be --kv-dtype $kv rc=$? $(grep -oE '"generated_ids":\[[0-9,]*\]' "$L/memra-gen-$be-$kv.log")"
done; done
for kv in bf16 f32; do
  say "$(el) == memra-bench --quant bf16 --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --kv-dtype $kv"
  timeout 90 "$D/bin/memra-bench" --quant bf16 --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --kv-dtype $kv \
    > "$L/bench-$kv.log" 2>&1
  grep -E "^(pp|tg|copy|peak|engine|memra-bench)" "$L/bench-$kv.log" | tee -a "$R"
done
say "$(el) done"
