#!/usr/bin/env bash
# The H200 soak of docs/PERFORMANCE.md ("Soak"): memra-host on the CUDA backend serving a
# random-weight Qwen3-8B-shaped bf16 model (scripts/make-random-qwen3-8b, with the real Qwen3
# tokenizer carried by carry_all.sh), driven by tests/serving/soak.py: 10 minutes at concurrency 64,
# a quarter of the streams hung up on, every finished answer equal to the same seeded request alone,
# then RSS and KV back to the baseline.
# A soak outlasts one device command (10 minutes), so it runs in two: `start` launches the host and
# the client in their own sessions (setsid: they outlive the command) and returns; other work may run
# meanwhile; `finish` waits for the client, stops the host (SIGTERM, drain) and puts the logs in $OUT.
# (`run` is what `start` launches: the whole soak in the foreground.)
# Usage: tests/cuda/soak_on_device.sh start|finish|run [<carried folder>=.device/all] [duration_s=600]
set -u
PHASE=${1:?start or finish}
D=$(readlink -f "${2:-.device/all}")
DURATION=${3:-600}
W=/tmp/memra-soak
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "$PHASE" in
start)
  rm -rf "$W"; mkdir -p "$W"
  S=$W/sys; mkdir -p "$S"; tar xJf "$D/syslib.tar.xz" -C "$S"
  [ -d "$D/bin" ] || tar xJf "$D/bin.tar.xz" -C "$D"
  # A new session: the device tool ends a command's other processes when it returns.
  setsid "$0" run "$D" "$DURATION" < /dev/null > "$W/driver.log" 2>&1 &
  echo "soak started in $W (the client writes $W/soak.log)"
  ;;
run)
    S=$W/sys
    export LD_LIBRARY_PATH=$S/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$W/home
    t0=$(date +%s)
    python3 "$REPO/scripts/make-random-qwen3-8b" "$W/qwen3-8b" > "$W/make-model.log" 2>&1 || { echo 3 > "$W/soak.rc"; exit 1; }
    xz -dc "$D/tokenizer-qwen3/tokenizer.json.xz" > "$W/qwen3-8b/tokenizer.json"
    cp "$D/tokenizer-qwen3/tokenizer_config.json" "$W/qwen3-8b/"
    echo "model made in $(( $(date +%s) - t0 )) s" >> "$W/make-model.log"
    "$D/bin/memra-host" --port 0 --backend cuda --model soak="$W/qwen3-8b" --no-repack --allow-generic \
      --max-running 64 --max-context 4096 > "$W/host.stdout" 2> "$W/host.log" &
    echo $! > "$W/host.pid"
    for _ in $(seq 1 600); do grep -q "listening on" "$W/host.stdout" 2>/dev/null && break; sleep 1; done
    PORT=$(grep -o "listening on http://127.0.0.1:[0-9]*" "$W/host.stdout" | grep -o "[0-9]*$")
    echo "host listening on $PORT $(( $(date +%s) - t0 )) s after the start" >> "$W/make-model.log"
    python3 "$REPO/tests/serving/soak.py" --url "http://127.0.0.1:$PORT" --model soak --pid "$(cat "$W/host.pid")" \
      --duration "$DURATION" --warmup 150 --concurrency 64 --cancel 0.25 --json "$W/summary.json" > "$W/soak.log" 2>&1
    echo $? > "$W/soak.rc"
  ;;
finish)
  OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
  # Until the client has finished (or the driver died without saying so).
  while [ ! -f "$W/soak.rc" ] && pgrep -f "soak_on_device.sh run" > /dev/null; do sleep 5; done
  sleep 1
  PID=$(cat "$W/host.pid" 2>/dev/null)
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null; for _ in $(seq 1 60); do kill -0 "$PID" 2>/dev/null || break; sleep 1; done; fi
  echo "soak rc=$(cat "$W/soak.rc" 2>/dev/null || echo none)"
  cat "$W/make-model.log" 2>/dev/null; tail -25 "$W/soak.log" 2>/dev/null
  grep -ciE " error|exception" "$W/host.log" | sed 's/^/host log lines naming an error: /'
  tar czf "$OUT/soak-logs.tar.gz" -C "$W" make-model.log host.stdout host.log soak.log driver.log $(cd "$W" && ls summary.json 2>/dev/null)
  ;;
esac
