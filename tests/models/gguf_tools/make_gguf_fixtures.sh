#!/usr/bin/env bash
# GGUF fixtures of a tiny transformers model, made by llama.cpp on the GPU machine, with
# llama.cpp's logits and its error against the model's transformers reference (the budget
# tests/engine/fixture_model_test.cpp's EngineGguf holds memra to):
#   make_gguf_fixtures.sh ANCHORS MODEL_DIR OUT_DIR NAME TYPE...
# ANCHORS: a copy of ../shared/anchors (llama.cpp tree, llama_anchor.sh, convert_driver.py);
# start `setsid bash ANCHORS/llama_anchor.sh build &` first, this waits for it. Writes
# OUT_DIR/NAME-BF16.gguf (llama.cpp's converter), NAME-TYPE.gguf (llama-quantize, no imatrix),
# input_ids.txt, NAME-*.ngl{0,99}.logits.f32.bin[.greedy.bin] and .dump.json (llamacpp_logits:
# CPU, then CUDA), llamacpp_vs_hf.json (compare_to_reference.py).
# Made so for tests/models/qwen3_5-tiny/gguf (TYPE Q8_0 Q4_0: the model's 128-wide rows
# leave the K-quants to llama.cpp's fallback types; CONVERT_ARGS=--no-mtp, the converter's
# flag for a Qwen3.5 checkpoint without MTP weights).
set -eu
A=$(cd "$1" && pwd); M=$(cd "$2" && pwd); O=$3; N=$4; shift 4
H=$(cd "$(dirname "$0")" && pwd); L=/tmp/llama
mkdir -p "$O"; O=$(cd "$O" && pwd)
while [ ! -f /tmp/llama-build.done ]; do
  [ -f /tmp/llama-build.failed ] && { echo "llama.cpp build failed: /tmp/llama-build.log"; exit 1; }; sleep 2; done
python3 "$A/convert_driver.py" $L "$M" ${CONVERT_ARGS:-} --outtype bf16 --outfile "$O/$N-BF16.gguf" > "$O/convert.log" 2>&1 || { tail -20 "$O/convert.log"; exit 1; }
for q in "$@"; do $L/build/bin/llama-quantize "$O/$N-BF16.gguf" "$O/$N-$q.gguf" "$q" > "$O/quantize-$q.log" 2>&1; done
[ -x /tmp/llamacpp_logits ] || g++ -O2 -std=c++17 "$H/llamacpp_logits.cpp" -I$L/include -I$L/ggml/include -L$L/build/bin -lllama \
  -Wl,-rpath,$L/build/bin -o /tmp/llamacpp_logits
python3 -c "import json,sys; print(' '.join(map(str, json.load(open(sys.argv[1]))['input_ids'])))" "$M/reference.json" > "$O/input_ids.txt"
for f in "$O/$N"-*.gguf; do
  t=$(basename "$f" .gguf)
  for ngl in 0 99; do /tmp/llamacpp_logits "$f" "$O/input_ids.txt" "$O/$t.ngl$ngl.logits.f32.bin" $ngl 24 > "$O/$t.ngl$ngl.log" 2>&1 || { tail -20 "$O/$t.ngl$ngl.log"; exit 1; }; done
done
python3 "$H/compare_to_reference.py" "$M" "$O"
