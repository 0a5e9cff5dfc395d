#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/carry_hybrid.sh's folder (#39), ordered by value, each part
# guarded by the time left (GUARD seconds, default 480, before the pairs of benchmarks):
# GPU checks of this tree; the qwen3_5-tiny GGUF fixtures with llama.cpp's logits and memra on
# them; the 16-layer Qwen3.5-27B shape converted and quantized, llama.cpp and memra side by side.
# QUICK=1: the GPU checks only (about 3 minutes).
set -u
. "$(dirname "$0")/device_lib.sh" "${1:-.device/q35}"
[ "${QUICK:-}" = 1 ] || setsid bash $D/anchors/llama_anchor.sh build > /dev/null 2>&1 &
unpack_carry
t "$(nvidia-smi --query-gpu=name --format=csv,noheader) $(nproc) cores $(df -h /tmp | tail -1)"
W=/tmp/w; mkdir -p $W
[ "${QUICK:-}" = 1 ] || (python3 $D/anchors/make_random_hf.py $W/m --preset qwen3.5-27b --set num_hidden_layers=16 --tokenizer tests/models/qwen3_5-tiny \
   > $L/make_model.log 2>&1; touch $W/model.done) &
run() { local b=$1 f=$2; timeout 150 $D/bin/$b --gtest_filter="$f" > $L/$b.log 2>&1
  t "$b $f rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/$b.log | tr '\n' ' ')"; grep -E "^\[  FAILED|Failure" $L/$b.log | head -5 | tee -a $OUT/summary.txt; }
run engine_fixture_test '*/cuda*'
run engine_recurrent_state_test '*/cuda*'
run engine_mtp_test '*/cuda*'
# memra-kernel-check (about 5 minutes) beside the CPU work below; the benchmarks wait for it.
(timeout 420 $D/bin/memra-kernel-check > $L/kc.log 2>&1; t "kernel-check rc=$? $(tail -1 $L/kc.log)"
 grep -E "^FAIL" $L/kc.log | head -5 | tee -a $OUT/summary.txt; touch $W/kc.done) &
if [ "${QUICK:-}" = 1 ]; then t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs; exit 0; fi
while [ ! -f $W/model.done ]; do sleep 2; done; t "model: $(tail -2 $L/make_model.log | tr '\n' ' ')"
while [ ! -f /tmp/llama/convert_hf_to_gguf.py ]; do sleep 1; done
python3 $D/anchors/convert_driver.py /tmp/llama $W/m --no-mtp --outtype bf16 --outfile $W/q35-BF16.gguf > $L/convert.log 2>&1; t "convert rc=$?"
tail -2 $L/convert.log; rm -rf $W/m
while [ ! -f /tmp/llama-build.done ]; do [ -f /tmp/llama-build.failed ] && { t "llama build failed"; tail -5 /tmp/llama-build.log; break; }; sleep 2; done
t "llama.cpp built"
(for q in Q4_K_M Q8_0; do /tmp/llama/build/bin/llama-quantize $W/q35-BF16.gguf $W/q35-$q.gguf $q 7 > $L/quant-$q.log 2>&1; t "quantize $q rc=$?"; done) &
CONVERT_ARGS=--no-mtp bash tests/models/gguf_tools/make_gguf_fixtures.sh $D/anchors tests/models/qwen3_5-tiny $OUT/q35gguf qwen3_5 Q8_0 Q4_0 > $L/fixtures.log 2>&1
t "fixtures rc=$?"; tail -6 $L/fixtures.log | tee -a $OUT/summary.txt
# The MTP fixture as llama.cpp converts it (blk.4.nextn.*): memra's head on the GGUF.
python3 $D/anchors/convert_driver.py /tmp/llama tests/models/qwen3_5-mtp-tiny --outtype bf16 --outfile $OUT/q35gguf/qwen3_5-mtp-BF16.gguf \
  > $L/convert-mtp.log 2>&1; t "convert mtp rc=$?"
mkdir -p tests/models/qwen3_5-mtp-tiny/gguf && cp $OUT/q35gguf/qwen3_5-mtp-BF16.gguf tests/models/qwen3_5-mtp-tiny/gguf/
timeout 100 $D/bin/engine_mtp_test --gtest_filter='*Gguf*' > $L/mtp-gguf.log 2>&1
t "memra mtp on the GGUF rc=$? $(grep -E '^\[  (PASSED|FAILED)|head max' $L/mtp-gguf.log | tr '\n' ' ')"
tar czf $OUT/q35gguf.tar.gz -C $OUT q35gguf && rm -rf $OUT/q35gguf/*.gguf
mkdir -p tests/models/qwen3_5-tiny/gguf && tar xzf $OUT/q35gguf.tar.gz -C /tmp && cp /tmp/q35gguf/*.gguf /tmp/q35gguf/llamacpp_vs_hf.json tests/models/qwen3_5-tiny/gguf/
timeout 100 $D/bin/engine_fixture_test --gtest_filter='*EngineGguf*qwen3_5*' > $L/gguf.log 2>&1
t "memra on the GGUF fixtures rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/gguf.log | tr '\n' ' ')"
grep -E "memra rmse|Failure|FAILED|rror" $L/gguf.log | head -14 | tee -a $OUT/summary.txt
pair() { local q=$1 f=$W/q35-$1.gguf
  [ -f $f ] || { t "$f not ready"; return; }
  [ $(el) -lt ${GUARD:-480} ] || { t "skip $q: $(el) s used"; return; }
  timeout 60 bash $D/anchors/llama_anchor.sh bench $f -p 512 -n 128 -r 2 > $L/llama-$q.md 2>&1
  t "llama.cpp $q rc=$?"; grep -E "pp512|tg128" $L/llama-$q.md | tee -a $OUT/summary.txt
  timeout 60 $D/bin/memra-bench $f --prompt-tokens 512 --gen-tokens 128 --repeats 2 > $L/memra-$q.log 2>&1
  t "memra $q rc=$?"; grep -E "^(model|pp|tg)" $L/memra-$q.log | tee -a $OUT/summary.txt; tail -1 $L/memra-$q.log | tee -a $OUT/summary.txt; }
while [ ! -f $W/kc.done ]; do sleep 2; done
pair BF16
wait
pair Q4_K_M
pair Q8_0
# MTP (#39): K = 3 at a forced 75 % per-token acceptance, the head's compute real.
mtp() { [ $(el) -lt ${GUARD2:-520} ] || { t "skip mtp $1: $(el) s used"; return; }
  timeout 120 $D/bin/memra-bench --model $1 --quant q4_k --spec mtp --spec-k 3 --oracle-accept 0.75 --gen 128 --spec-repeats 2 > $L/mtp-$1.log 2>&1
  t "memra mtp $1 rc=$?"; grep -E "^spec|^\(mtp" $L/mtp-$1.log | tee -a $OUT/summary.txt; tail -2 $L/mtp-$1.log | tee -a $OUT/summary.txt; }
mtp qwen3.5-27b-16l
t "end"; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs
