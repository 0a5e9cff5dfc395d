#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over a seed corpus; fails on any
# crash, sanitizer report or libFuzzer error.
# usage: run_fuzzer.sh <fuzzer> <seed_dir> <work_dir> <seconds>
set -u
if [ $# -ne 4 ] || [ "$1" = "--help" ]; then
  echo "usage: run_fuzzer.sh <fuzzer> <seed_dir> <work_dir> <seconds>"
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 secs=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
"$fuzzer" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" > "$work/log.txt" 2>&1
rc=$?
tail -n 25 "$work/log.txt"
if [ "$rc" -ne 0 ] || grep -qE 'runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$work/log.txt"; then
  echo "FUZZ FAILURE (exit $rc); crashing inputs: $(ls "$work/artifacts")"
  exit 1
fi
echo "fuzzer ran clean for ${secs}s"
