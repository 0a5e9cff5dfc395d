#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/carry_hybrid.sh's folder packed with BINS="memra-host
# memra-bench" (anchors: make_random_hf.py): #43's checks of the memory plan on a real card.
#  1. memra-bench on the Qwen3-8B shape in bf16: TTFT of a 32,768-token prompt and decode at
#     depth 0 and 32,768 (the engine alone, random weights).
#  2. A transformers-saved random Qwen3-8B (40,960 positions) served by memra-host with no
#     context flags: the plan block, /v1/models' memra object, a ~32,700-token prompt through
#     /v1/completions (TTFT as the client sees it), then a second start of the same model
#     (its repack reused): seconds to /ready.
# About 5 minutes. Usage: bash tests/cuda/memory_plan_on_device.sh [.device/q35]
set -u
. "$(dirname "$0")/device_lib.sh" "${1:-.device/q35}"
unpack_carry
t "$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"
timeout 150 $D/bin/memra-bench --model qwen3-8b --quant bf16 --prompt-tokens 32768 --gen-tokens 64 --depth 0,32768 --repeats 1 \
  > $L/bench-8b.log 2>&1
t "memra-bench 8b bf16 rc=$?"; grep -E "^(pp|tg)" $L/bench-8b.log | tee -a $OUT/summary.txt
W=/tmp/w; mkdir -p $W
timeout 200 python3 $D/anchors/make_random_hf.py $W/m --preset qwen3-8b --tokenizer tests/models/tiny-random > $L/make_model.log 2>&1
t "model rc=$? $(tail -1 $L/make_model.log)"
serve() {  # $1: label; starts the host, waits for /ready, prints the seconds it took
  local s=$(date +%s%N)
  $D/bin/memra-host --port 18200 --backend cuda --allow-generic --model q8b=$W/m > $L/host-$1.log 2>&1 &
  HOST=$!
  for i in $(seq 1 600); do curl -sf localhost:18200/ready > /dev/null && break; kill -0 $HOST 2>/dev/null || break; sleep 0.2; done
  t "$1 start: ready after $(( ($(date +%s%N) - s) / 1000000 )) ms (rc of /ready: $(curl -s -o /dev/null -w '%{http_code}' localhost:18200/ready))"
}
serve first
grep -E "memory plan|weights |KV cache |recurrent state|context |REDUCED|cannot load|repacked" $L/host-first.log | cut -c1-400 | tee -a $OUT/summary.txt
curl -s localhost:18200/v1/models > $L/models.json
python3 -c "import json;m=json.load(open('$L/models.json'))['data'][0];print('max_model_len',m['max_model_len'],{k:v for k,v in m['memra'].items() if k!='plan'})" \
  | tee -a $OUT/summary.txt
# A prompt of ~32,700 tokens: a sentence repeated, counted by /tokenize first.
python3 - > $L/ttft.log 2>&1 <<'EOF'
import json, time, urllib.request
def post(path, body, stream=False):
    r = urllib.request.Request("http://localhost:18200" + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(r, timeout=300)
unit = "the quick brown fox jumps over the lazy dog. "
n = json.load(post("/tokenize", {"model": "q8b", "prompt": unit * 100}))["count"]
text = unit * int(100 * 32700 / n)
count = json.load(post("/tokenize", {"model": "q8b", "prompt": text}))["count"]
for run in range(2):
    t0 = time.time(); first = None; got = 0
    with post("/v1/completions", {"model": "q8b", "prompt": text, "max_tokens": 16, "stream": True, "ignore_eos": True}) as r:
        for line in r:
            if line.startswith(b"data: {"):
                if first is None: first = time.time() - t0
                got += 1
    print(f"prompt {count} tokens: TTFT {first * 1000:.0f} ms, {got} chunks, total {time.time() - t0:.2f} s (run {run}: "
          f"{'the prefix cache may serve it' if run else 'cold'})")
EOF
t "32K prompt rc=$?"; cat $L/ttft.log | tail -3 | tee -a $OUT/summary.txt
curl -s localhost:18200/metrics | grep -E "^memra_(memory_plan_bytes|context_tokens|kv_cache_tokens)" | tee -a $OUT/summary.txt
kill $HOST; wait $HOST 2>/dev/null
serve second
grep -E "engine ready|verif|reus" $L/host-second.log | cut -c1-300 | tee -a $OUT/summary.txt
kill $HOST; wait $HOST 2>/dev/null
t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs
