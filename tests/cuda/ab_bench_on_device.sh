#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/ab_carry.sh's folder: memra-bench with the old and
# the new backend, alternating (old then new, new then old, ...) for <rounds> rounds, so
# drift hits both alike; each run's figure lines, then per line its median over the
# rounds for each side and new / old.
# Usage: bash .device/ab/ab_bench_on_device.sh .device/ab <rounds> <memra-bench args...>
#   e.g. ... .device/ab 3 --quant fp8 --prompt-tokens 16 --gen-tokens 64
set -u
D=$(readlink -f "${1:?carried folder}")
ROUNDS=${2:?rounds}
shift 2
[ -d "$D/new" ] || tar xJf "$D/ab.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
L=$(mktemp)
nvidia-smi --query-gpu=name --format=csv,noheader
echo "old $(cat "$D/old/REV"), new $(cat "$D/new/REV"); memra-bench $*"
run() {  # <side> <memra-bench args...>: its figure lines, tagged "<side> <line>"
  local side=$1 be=$D/new/lib/memra/libmemra-backend-cuda.so
  shift
  [ "$side" = old ] && be=$D/old/lib/memra/libmemra-backend-cuda.so
  MEMRA_CUDA_BACKEND=$be timeout 300 "$D/new/bin/memra-bench" "$@" 2>&1 | grep -E "^(pp|tg)[0-9]+.*tok/s" | sed "s/^/$side /" | tee -a "$L"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run old "$@"; run new "$@"; else run new "$@"; run old "$@"; fi
done
# "<side> tg64 @ depth 0: 305.2 tok/s ..." -> per (line kind, side) the median tok/s.
python3 - "$L" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, rest = line.split(" ", 1)
    m = re.match(r"(.*?): ([0-9.]+) tok/s", rest)
    if m: rows.setdefault(m.group(1), {}).setdefault(side, []).append(float(m.group(2)))
for kind, sides in rows.items():
    o, n = statistics.median(sides.get("old", [0])), statistics.median(sides.get("new", [0]))
    print(f"{kind}: old {o:.1f}, new {n:.1f} tok/s (medians of {len(sides.get('old', []))} / {len(sides.get('new', []))}); new / old {n / o if o else 0:.3f}")
PY
