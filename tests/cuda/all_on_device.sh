#!/usr/bin/env bash
# On a GPU machine (nvidia-h200-x2 for the two-GPU parts), from tests/cuda/carry_all.sh's
# folder: memra-kernel-check, every tests/cuda suite and the CUDA instances of the suites
# over backends (the fixture oracles eager too), memra-gen CUDA vs CPU,
# then the memra-bench figures of docs/PERFORMANCE.md (issue #15's table by memra-bench --table). A summary goes to $OUT/summary.txt,
# the logs to $OUT/logs.tar.gz. Each part has its own time limit; the order is by value.
# Usage: tests/cuda/all_on_device.sh [<carried folder>=.device/all] [quick | only:<regex> | bench | bench:<regex>]
#   quick: checks and tests only; only:<regex>: checks, tests and the benchmarks whose
#   arguments match the extended regex (e.g. only:'spec|--pp'); bench, bench:<regex>: the
#   benchmarks (all, or those matching) without the checks and tests.
set -u
D=$(readlink -f "${1:-.device/all}")
QUICK=${2:-}
OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
L=$(mktemp -d); R=$OUT/summary.txt
S=$(mktemp -d); tar xJf "$D/syslib.tar.xz" -C "$S"
[ -f "$D/bin.tar.xz" ] && tar xJf "$D/bin.tar.xz" -C "$D"  # binaries and modules (carry_all.sh)
[ -f "$D/fixtures.tar.xz" ] && tar xJf "$D/fixtures.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
export MEMRA_FIXTURES_DIR=$D/fixtures MEMRA_EXAMPLE_PLUGIN_DIR=$D/lib/sdk-example NCCL_NVLS_ENABLE=0
say() { echo "$@" | tee -a "$R"; }
trap 'tar czf "$OUT/logs.tar.gz" -C "$L" . 2>/dev/null' EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$R"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "$QUICK" in bench*) ;; *)
timeout 300 "$D/bin/memra-kernel-check" > "$L/kernel-check.log" 2>&1; say "memra-kernel-check rc=$? $(tail -1 "$L/kernel-check.log")"
grep -E "^FAIL" "$L/kernel-check.log" | head -10 | tee -a "$R"
# The tests/cuda suites (cuda_*), then the CUDA instances of the suites over backends
# (engine_*, tests/support/backends.hpp; their CPU instances run in CI): whichever
# carry_all.sh carried.
run_test() {  # <binary> <log name> [gtest args...]
  local t=$1 log=$2; shift 2
  timeout 180 "$D/bin/$t" "$@" > "$L/$log.log" 2>&1
  say "$log rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/$log.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" "$L/$log.log" | head -5 | tee -a "$R"
}
for t in $(cd "$D/bin" && ls cuda_*_test); do run_test "$t" "$t"; done
for t in $(cd "$D/bin" && ls engine_*_test); do run_test "$t" "$t" --gtest_filter='*/cuda*'; done
export MEMRA_CUDA_GRAPH=0  # the fixture oracles again, decode steps eager
run_test cuda_fixture_test cuda_fixture_test_eager
run_test engine_fixture_test engine_fixture_test_eager --gtest_filter='*/cuda*'
unset MEMRA_CUDA_GRAPH
for be in cpu cuda; do
  timeout 60 "$D/bin/memra-gen" "$D/fixtures/models/llama" --prompt "The capital of France is" --max-tokens 12 \
    --backend $be --json > "$L/memra-gen-$be.log" 2>&1
  say "memra-gen --backend $be rc=$? $(grep -oE '"generated_ids":\[[0-9,]*\]' "$L/memra-gen-$be.log")"
  grep -E "error|Error" "$L/memra-gen-$be.log" | head -3 | tee -a "$R"
done
esac
[ "$QUICK" = quick ] && exit 0
# bench [VAR=VALUE ...] ARGS: memra-bench with those environment settings; the table rows
# of --table, the figure lines of the others go to the summary.
bench() { local envs=(); while [[ "${1:-}" == *=* ]]; do envs+=("$1"); shift; done
         case "$QUICK" in only:*|bench:*) echo "${envs[*]} $*" | grep -qE "${QUICK#*:}" || return 0 ;; esac
         say "== ${envs[*]} memra-bench $*"; timeout 900 env "${envs[@]}" "$D/bin/memra-bench" "$@" 2>&1 | tee -a "$L/bench.log" |
          grep -E "^(pp|tg|copy|peak|spec|pipeline|serve|mask| +[0-9]|\|)|floors met" | tee -a "$R"; }
# Issue #15's table in one run (memra-bench --table), with the default f16, the f32 and the bf16 KV cache.
bench --table
bench --table --kv-dtype f32
bench --table --kv-dtype bf16  # #14: bf16 depth 4096 >= 0.93 x depth 0 with the bf16 KV cache
# The fp8 KV cache against f16 at depth (a depth-4096 token reads about half the KV bytes).
bench --quant q4_k --kv-dtype fp8 --prompt-tokens 16 --gen-tokens 64 --depth 0,4096
bench --quant q4_k --kv-dtype f16 --prompt-tokens 16 --gen-tokens 64 --depth 0,4096
# Where a decode step's time goes (MEMRA_CUDA_PROFILE: eager, per kernel), bf16 and q4_k.
profile() { case "$QUICK" in only:*|bench:*) echo "profile $*" | grep -qE "${QUICK#*:}" || return 0 ;; esac
           say "== MEMRA_CUDA_PROFILE=1 memra-bench $*"; timeout 300 env MEMRA_CUDA_PROFILE=1 "$D/bin/memra-bench" "$@" > "$L/profile.log" 2>&1
           grep -A14 "decode profile" "$L/profile.log" | tee -a "$R"; cat "$L/profile.log" >> "$L/profiles.log"; }
profile --quant bf16 --prompt-tokens 16 --gen-tokens 32 --repeats 1
profile --quant q4_k --prompt-tokens 16 --gen-tokens 32 --repeats 1
profile --quant q4_k --prompt-tokens 16 --gen-tokens 32 --depth 4096 --repeats 1
# The decode GEMVs on their own (memra-kernel-check --bench: per shape and M the best dp4a and
# tensor-core configuration, and a Qwen3-8B layer's sum; every configuration in the log).
kbench() { case "$QUICK" in only:*|bench:*) echo "kernel-bench" | grep -qE "${QUICK#*:}" || return 0 ;; esac
          say "== memra-kernel-check --bench"; timeout 300 "$D/bin/memra-kernel-check" --bench > "$L/kernel-bench.log" 2>&1
          grep -E "^bench: .*(best per matrix|Qwen3-8B layer|\| mma)" "$L/kernel-bench.log" | tee -a "$R"; }
kbench
# True per-kernel durations of decode steps (ncu, caches kept warm, eager launches): the
# launches after the warm-up's prefill, per kernel and grid, for STEPS decode steps.
ncu_profile() { local steps=$1; shift
  case "$QUICK" in only:*|bench:*) echo "ncu $*" | grep -qE "${QUICK#*:}" || return 0 ;; esac
  command -v ncu > /dev/null || { say "ncu: not on this machine"; return 0; }
  say "== MEMRA_CUDA_GRAPH=0 ncu memra-bench $*"
  MEMRA_CUDA_GRAPH=0 timeout 400 ncu --clock-control none --cache-control none --launch-skip 1500 --launch-count 2000 \
    --metrics gpu__time_duration.sum --csv --print-units base "$D/bin/memra-bench" "$@" > "$L/ncu.csv" 2> "$L/ncu.err"
  python3 "$REPO/tests/cuda/ncu_summary.py" "$L/ncu.csv" "$steps" | tee -a "$R"; cat "$L/ncu.csv" >> "$L/ncu-all.csv"; }
ncu_profile 3.6 --quant bf16 --prompt-tokens 16 --gen-tokens 8 --repeats 1
ncu_profile 2.9 --quant q4_k --prompt-tokens 16 --gen-tokens 8 --repeats 1
bench --quant bf16 --prompt-tokens 512 --gen-tokens 64 --depth 0,4096 --batches 1,4,8,16 --decode 16
bench --quant q4_k --spec ngram --spec-k 4 --gen 128
bench --quant q4_k --spec ngram --spec-k 8 --gen 128
bench --quant bf16 --concurrency 8 --prompt 64 --decode 64 --gen-tokens 8 --repeats 3
# #16: what the json_object grammar mask costs decode, on the soak's Qwen3-8B-shaped model with the
# real Qwen3 tokenizer (soak_on_device.sh made it on this machine; skipped without it).
[ -d /tmp/memra-soak/qwen3-8b ] && bench /tmp/memra-soak/qwen3-8b --json-mask --concurrency 1 --prompt 64 --decode 128
# #17: speculative decoding on the trained demo model, real text (docs/PERFORMANCE.md's CPU table).
for k in 1 2 4 8; do
  bench "$REPO/host/default_model" --spec ngram --prompt-file "$REPO/scripts/demo_model/heldout.txt" --prompt 256 --gen 128 --spec-k $k
  bench "$REPO/host/default_model" --spec draft --draft "$REPO/host/default_draft_model" \
    --prompt-file "$REPO/scripts/demo_model/heldout.txt" --prompt 256 --gen 128 --spec-k $k
done
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  bench --quant bf16 --pp 2 --concurrency 8 --prompt 64 --decode 64 --gen-tokens 8 --repeats 3
  bench --quant bf16 --pp 2 --prompt-tokens 512 --gen-tokens 64 --batches 1,8 --decode 16
fi
