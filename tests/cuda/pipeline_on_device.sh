#!/usr/bin/env bash
# Pipeline stages (PP) on a GPU machine from a carried folder (built elsewhere with
# -DMEMRA_CUDA=ON; see tests/cuda/DEVICE-NOTES.md): tests/cuda/pipeline_cuda_test and the
# CUDA instances of the pipeline suites over backends with step graphs (default) and eagerly, then memra-bench on the Qwen3-8B shape, one GPU
# vs --pp 2 on devices 0 and 1 (and two stages on device 0), batch 1 and 8.
# Usage: tests/cuda/pipeline_on_device.sh <carried-dir>   (logs into $OUT or ./device-logs)
# Carried dir: bin/{cuda_pipeline_test,engine_pipeline_test,engine_pipeline_serving_test,
# memra-bench}, lib/memra/ (backend module, kernels,
# plugins), fixtures/{models/llama,models/qwen3,gguf/llama/llama-Q4_K_M.gguf}, syslib/
# (host libraries the image may lack, e.g. libcrypto.so.3).
set -u
D=$(readlink -f "${1:-.device/pp}")
OUT=${OUT:-./device-logs}
mkdir -p "$OUT"
export MEMRA_FIXTURES_DIR="$D/fixtures"
export MEMRA_HOME=$(mktemp -d)
export LD_LIBRARY_PATH="$D/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee "$OUT/nvidia-smi.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
rc=0
run_test() {  # test, log, env...
  local t=$1 log=$2; shift 2
  env "$@" timeout 100 "$D/bin/$t" --gtest_filter='PipelineCuda.*:*/cuda*' > "$OUT/$log" 2>&1 || rc=1
  echo "== $log: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|^\[ [a-z].* \] |Failure|rror|Skipped|unavailable" "$OUT/$log" | head -30
}
for t in cuda_pipeline_test engine_pipeline_test engine_pipeline_serving_test; do
  run_test $t $t.log MEMRA_CUDA_GRAPH=1
  run_test $t ${t}_eager.log MEMRA_CUDA_GRAPH=0
done
BENCH="--prompt-tokens 128 --gen-tokens 64 --repeats 2 --batches 1,8 --prompt 64 --decode 32"
bench() {  # label, args...
  local label=$1; shift
  echo "== memra-bench $label: $*" | tee -a "$OUT/bench.log"
  timeout 70 "$D/bin/memra-bench" "$@" $BENCH 2>&1 | grep -v "plugin loaded" | tee -a "$OUT/bench.log"
}
bench "bf16 one GPU" --quant bf16 --pp 1
bench "bf16 PP-2 (GPUs 0,1)" --quant bf16 --pp 2
bench "q4_k one GPU" --quant q4_k --pp 1
bench "q4_k PP-2 (GPUs 0,1)" --quant q4_k --pp 2
bench "bf16 PP-2 on GPU 0 only" --quant bf16 --pp 2 --pp-devices 0,0
# Micro-batched steps (stage 0 on one half of the batch while stage 1 on the other):
# only the batch table matters here.
exit $rc
