#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/carry_hybrid.sh's folder (anchors included; BINS="memra-bench"
# is enough): #43's long-context pair on the Qwen3-8B shape in bf16 -- llama.cpp (llama-bench -fa 1)
# beside memra-bench on a random transformers-saved Qwen3-8B converted by llama.cpp's converter:
# pp of a 32,768-token prompt (TTFT), and decode at depth 0 and 32,768. About 7 minutes (the
# llama.cpp build runs in the background from the start). Usage: bash $0 [.device/q35]
set -u
. "$(dirname "$0")/device_lib.sh" "${1:-.device/q35}"
setsid bash $D/anchors/llama_anchor.sh build > /dev/null 2>&1 &
unpack_carry
t "$(nvidia-smi --query-gpu=name --format=csv,noheader)"
W=/tmp/w; mkdir -p $W
python3 $D/anchors/make_random_hf.py $W/m --preset qwen3-8b --tokenizer tests/models/tiny-random > $L/make_model.log 2>&1
t "model: $(tail -1 $L/make_model.log)"
while [ ! -f /tmp/llama/convert_hf_to_gguf.py ]; do sleep 1; done
python3 $D/anchors/convert_driver.py /tmp/llama $W/m --outtype bf16 --outfile $W/q8b-BF16.gguf > $L/convert.log 2>&1; t "convert rc=$?"
rm -rf $W/m
timeout 120 $D/bin/memra-bench $W/q8b-BF16.gguf --prompt-tokens 32768 --gen-tokens 64 --depth 0,32768 --repeats 1 > $L/memra.log 2>&1
t "memra rc=$?"; grep -E "^(pp|tg)" $L/memra.log | tee -a $OUT/summary.txt
while [ ! -f /tmp/llama-build.done ]; do [ -f /tmp/llama-build.failed ] && { t "llama build failed"; break; }; sleep 2; done
t "llama.cpp built"
timeout 150 bash $D/anchors/llama_anchor.sh bench $W/q8b-BF16.gguf -p 32768 -n 64 -d 0,32768 -r 1 > $L/llama.md 2>&1
t "llama.cpp rc=$?"; grep -E "pp32768|tg64" $L/llama.md | tee -a $OUT/summary.txt
t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs
