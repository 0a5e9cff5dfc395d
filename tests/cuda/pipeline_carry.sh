#!/usr/bin/env bash
# Assembles the folder tests/cuda/pipeline_on_device.sh runs from (the GPU image lacks
# the dev packages to build; binaries built here run there). ~23 MB.
# Usage: tests/cuda/pipeline_carry.sh <build-dir configured with -DMEMRA_CUDA=ON> [<dest>=.device/pp]
set -eu
B=${1:?build dir}
D=${2:-.device/pp}
F=${MEMRA_FIXTURES_DIR:-$(dirname "$0")/../../../shared/fixtures}
TESTS="cuda_pipeline_test engine_pipeline_test engine_pipeline_serving_test"
cmake --build "$B" -j2 --target memra_backend_cuda memra_kernel_modules $TESTS memra-bench \
  memra_family_llama memra_quant_float memra_quant_q4_k memra_quant_q5_k memra_quant_q6_k memra_quant_q8_0
rm -rf "$D"
mkdir -p "$D/bin" "$D/lib" "$D/syslib" "$D/fixtures/models" "$D/fixtures/gguf/llama"
for t in $TESTS memra-bench; do cp "$B/bin/$t" "$D/bin/"; done
cp -r "$B/lib/memra" "$D/lib/"
strip "$D"/bin/* "$D"/lib/memra/*.so "$D"/lib/memra/plugins/*.so
cp -r "$F/models/llama" "$F/models/qwen3" "$D/fixtures/models/"
cp "$F/gguf/llama/llama-Q4_K_M.gguf" "$D/fixtures/gguf/llama/"
cp -L "$(ldconfig -p | awk '/libcrypto.so.3 /{print $NF; exit}')" "$D/syslib/"  # the tests link OpenSSL
chmod -R u+w "$D"
du -sh "$D"
