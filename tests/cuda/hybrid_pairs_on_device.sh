#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/carry_hybrid.sh's folder (anchors included; BINS=
# "memra-kernel-check memra-bench" is enough): the #39 speed pairs alone — the 16-layer
# Qwen3.5-27B shape converted and quantized by llama.cpp, llama-bench and memra-bench side by
# side on the same GGUFs (pp512, tg128), then memra's prefill profile on the full 27B shape in
# q4_k. memra-kernel-check, the CUDA suites carried and MTP at K = 3 (forced 75 %) against the
# oracle (ORACLE=1) on the full 27B shape run first, beside the CPU work (KC=0 skips kernel-check; KC=TEXT
# filters it). QUICK=1: no llama.cpp — kernel-check on the prompt GEMM and the plugin ops, the
# suites, the overlap A/B, MTP and the profile (about 4 minutes).
set -u
. "$(dirname "$0")/device_lib.sh" "${1:-.device/q35}"
[ "${QUICK:-}" = 1 ] || setsid bash $D/anchors/llama_anchor.sh build > /dev/null 2>&1 &
unpack_carry
t "$(nvidia-smi --query-gpu=name --format=csv,noheader)"
W=/tmp/w; mkdir -p $W
[ "${QUICK:-}" = 1 ] || (python3 $D/anchors/make_random_hf.py $W/m --preset qwen3.5-27b --set num_hidden_layers=16 --tokenizer tests/models/qwen3_5-tiny \
   > $L/make_model.log 2>&1; touch $W/model.done) &
# The GPU's first minutes, beside the CPU work: kernel-check, the CUDA suites, MTP on the 27B shape.
run() { local b=$1 f=$2; [ -x $D/bin/$b ] || return; timeout 150 $D/bin/$b --gtest_filter="$f" > $L/$b.log 2>&1
  t "$b $f rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/$b.log | tr '\n' ' ')"; grep -E "^\[  FAILED|Failure" $L/$b.log | head -5 | tee -a $OUT/summary.txt; }
mtp() { timeout 100 $D/bin/memra-bench --model qwen3.5-27b --quant q4_k --spec $1 --spec-k 3 --oracle-accept 0.75 --gen 128 --spec-repeats 2 \
  > $L/$1-27b.log 2>&1; t "27b $1 rc=$?"; grep -E "^spec|^\(mtp head" $L/$1-27b.log | tee -a $OUT/summary.txt; }
kc() { timeout 420 $D/bin/memra-kernel-check ${1:+--filter "$1"} > $L/kc$2.log 2>&1
  t "kernel-check ${1:+--filter '$1' }rc=$? $(tail -1 $L/kc$2.log)"; grep -E "^FAIL" $L/kc$2.log | head -5 | tee -a $OUT/summary.txt; }
# A/B in one call: the prompt's weight planes on a side stream and the DeltaNet decode form fused,
# or neither (the first moves pp only, the second tg only); the full 27B shape in q4_k.
overlap() { for ab in "1 1" "0 0"; do [ $(el) -lt ${GUARD:-500} ] || break; set -- $ab
  MEMRA_CUDA_DEQUANT_OVERLAP=$1 MEMRA_QWEN3NEXT_FUSED_DECODE=$2 timeout 60 $D/bin/memra-bench --model qwen3.5-27b --quant q4_k \
    --prompt-tokens 512 --gen-tokens 64 --repeats 3 > $L/27b-ab$1$2.log 2>&1
  t "27b q4_k overlap=$1 fused=$2 rc=$? $(grep -E '^(pp|tg)' $L/27b-ab$1$2.log | tr '\n' ' ')"; done; }
profile() { [ $(el) -lt ${GUARD:-520} ] && MEMRA_CUDA_PROFILE=prefill timeout 60 $D/bin/memra-bench --model qwen3.5-27b --quant q4_k \
  --prompt-tokens 512 --gen-tokens 8 --repeats 1 > $L/27b-prefill-prof.log 2>&1; t "27b prefill profile rc=$?"
  grep -E "^ *[a-z_0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%|^pp" $L/27b-prefill-prof.log | head -16 >> $OUT/summary.txt; }
if [ "${QUICK:-}" = 1 ]; then  # QUICK=1: no llama.cpp; kernel-check on the prompt GEMM and the plugin ops only
  kc "plugin op" 2
  run engine_fixture_test '*/cuda*'; run engine_mtp_test '*/cuda*'; run engine_recurrent_state_test '*/cuda*'
  overlap; kc gemm 1; mtp mtp; profile
  t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs; exit 0
fi
(if [ "${KC:-}" != 0 ]; then kc "${KC:-}" ""; fi
 run engine_fixture_test '*/cuda*'; run engine_mtp_test '*/cuda*'; run engine_recurrent_state_test '*/cuda*'
 mtp mtp; [ -n "${ORACLE:-}" ] && mtp oracle; touch $W/kc.done) &
while [ ! -f $W/model.done ]; do sleep 2; done; t "model: $(tail -1 $L/make_model.log)"
while [ ! -f /tmp/llama/convert_hf_to_gguf.py ]; do sleep 1; done
python3 $D/anchors/convert_driver.py /tmp/llama $W/m --no-mtp --outtype bf16 --outfile $W/q35-BF16.gguf > $L/convert.log 2>&1; t "convert rc=$?"
rm -rf $W/m
while [ ! -f /tmp/llama-build.done ]; do [ -f /tmp/llama-build.failed ] && { t "llama build failed"; tail -5 /tmp/llama-build.log; break; }; sleep 2; done
t "llama.cpp built"
for q in Q4_K_M Q8_0; do /tmp/llama/build/bin/llama-quantize $W/q35-BF16.gguf $W/q35-$q.gguf $q 8 > $L/quant-$q.log 2>&1; t "quantize $q rc=$?"; done
while [ ! -f $W/kc.done ]; do sleep 2; done
pair() { local q=$1 f=$W/q35-$1.gguf
  [ -f $f ] || { t "$f not ready"; return; }
  [ $(el) -lt ${GUARD:-520} ] || { t "skip $q: $(el) s used"; return; }
  timeout 60 bash $D/anchors/llama_anchor.sh bench $f -p 512 -n 128 -r 2 > $L/llama-$q.md 2>&1
  t "llama.cpp $q rc=$?"; grep -E "pp512|tg128" $L/llama-$q.md | tee -a $OUT/summary.txt
  timeout 60 $D/bin/memra-bench $f --prompt-tokens 512 --gen-tokens 128 --repeats 2 > $L/memra-$q.log 2>&1
  t "memra $q rc=$?"; grep -E "^(pp|tg)" $L/memra-$q.log | tee -a $OUT/summary.txt; }
pair BF16; pair Q4_K_M; pair Q8_0
overlap; profile
t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs
