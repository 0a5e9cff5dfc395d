#!/usr/bin/env bash
# Issue #40 on the GPU machine, from tests/cuda/ab_carry.sh's folder (carried with
# EXTRA_BINS="memra-kernel-check cuda_kernels_test cuda_plugin_kernel_test ..."): every
# scheme's kernels now come from its quant plugin, so memra-kernel-check (all schemes,
# bitwise and bounded against their CPU references), the carried CUDA suites, then a
# same-machine A/B of memra-bench for the schemes given (old: <rev>'s backend with its
# built-in kernels; new: this tree's, kernels registered by the plugins).
# Usage: [NEW_ONLY="nvfp4"] bash .device/ab/scheme_plugins_on_device.sh .device/ab <rounds> <schemes...> [-- memra-bench args]
#   e.g. ... .device/ab 1 bf16 q4_k fp8 -- --prompt-tokens 512 --gen-tokens 64
set -u
D=$(readlink -f "${1:?carried folder}")
ROUNDS=${2:?rounds}
shift 2
SCHEMES=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do SCHEMES+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
OUT=${OUT:-./device-logs}; mkdir -p "$OUT"
R=$OUT/summary.txt
say() { echo "$@" | tee -a "$R"; }
[ -d "$D/new" ] || tar xJf "$D/ab.tar.xz" -C "$D"
# Fixtures for the suites (carried as fixtures.tar.xz: models/..., gguf/...), if any.
[ -f "$D/fixtures.tar.xz" ] && [ ! -d "$D/fixtures" ] && tar xJf "$D/fixtures.tar.xz" -C "$D"
[ -d "$D/fixtures" ] && export MEMRA_FIXTURES_DIR=$D/fixtures
export LD_LIBRARY_PATH=$D/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MEMRA_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$R"
if [ -z "${SKIP_CHECKS:-}" ]; then
  timeout ${KC_TIMEOUT:-540} "$D/new/bin/memra-kernel-check" > "$OUT/kernel-check.log" 2>&1
  say "memra-kernel-check rc=$? $(tail -1 "$OUT/kernel-check.log")"
  grep -E "^FAIL" "$OUT/kernel-check.log" | head -20 | tee -a "$R"
  grep -cE "^PASS" "$OUT/kernel-check.log" | sed 's/^/PASS lines: /' | tee -a "$R"
  for t in $(cd "$D/new/bin" && ls cuda_*_test engine_*_test 2>/dev/null); do
    filter=()
    case "$t" in engine_*) filter=(--gtest_filter='*cuda*') ;; esac
    timeout 240 "$D/new/bin/$t" "${filter[@]}" > "$OUT/$t.log" 2>&1
    say "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$t.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED|Failure" "$OUT/$t.log" | head -5 | tee -a "$R"
  done
fi
# Plugin schemes the old tree lacks (NEW_ONLY="nvfp4 ..."): their kernels through the backend
# against their plugin's CPU matmul, then their memra-bench figures (new tree only).
for q in ${NEW_ONLY:-}; do
  timeout 300 "$D/new/bin/memra-kernel-check" --plugin-dir "$D/new/lib/memra/plugins" --filter "matmul $q" > "$OUT/kernel-check-$q.log" 2>&1
  say "memra-kernel-check --plugin-dir (matmul $q) rc=$? $(tail -1 "$OUT/kernel-check-$q.log")"
  grep -E "^FAIL" "$OUT/kernel-check-$q.log" | head -10 | tee -a "$R"
  say "== memra-bench --quant $q $* (new only)"
  timeout 240 "$D/new/bin/memra-bench" --quant "$q" "$@" 2>&1 | grep -E "^(pp|tg|model|copy)" | tee -a "$R"
done
for q in "${SCHEMES[@]}"; do
  say "== A/B --quant $q $*"
  bash "$D/ab_bench_on_device.sh" "$D" "$ROUNDS" --quant "$q" "$@" 2>&1 | grep -E "new / old|old [0-9a-f]+, new" | tee -a "$R"
done
