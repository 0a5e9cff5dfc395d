#!/usr/bin/env bash
# On the GPU machine, from tests/cuda/carry_hybrid.sh's folder (#39): the CUDA suites that
# speculative decoding and the step graphs touch, then memra-bench on the full Qwen3.5-27B
# shape: MTP at K = 3 with a forced 75 % acceptance against the oracle's ceiling, the
# batch-1 roofline fraction against the dense Qwen3-8B shape per scheme, depth 32768
# against depth 0, and a prefill profile. Each part guarded by the time left (LIMIT seconds,
# default 500). KC=1: memra-kernel-check first.
set -u
. "$(dirname "$0")/device_lib.sh" "${1:-.device/q35}"
unpack_carry
t "$(nvidia-smi --query-gpu=name --format=csv,noheader)"
run() { local b=$1 f=$2; timeout 150 $D/bin/$b --gtest_filter="$f" > $L/$b.log 2>&1
  t "$b $f rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/$b.log | tr '\n' ' ')"; grep -E "^\[  FAILED|Failure" $L/$b.log | head -5 | tee -a $OUT/summary.txt; }
run engine_mtp_test '*/cuda*'
# memra-kernel-check (about 4-5 minutes) first when KC=1: the benchmarks below must not share the GPU.
[ "${KC:-0}" = 1 ] && { timeout 420 $D/bin/memra-kernel-check > $L/kc.log 2>&1; t "kernel-check rc=$? $(tail -1 $L/kc.log)"
  grep -E "^FAIL" $L/kc.log | head -5 | tee -a $OUT/summary.txt; }
run engine_fixture_test '*/cuda*'
run engine_recurrent_state_test '*/cuda*'
run engine_speculative_scheduler_test '*/cuda*'
bench() { local name=$1; shift
  [ $(el) -lt ${LIMIT:-500} ] || { t "skip $name: $(el) s used"; return; }
  timeout 150 $D/bin/memra-bench "$@" > $L/$name.log 2>&1; t "$name rc=$?"
  grep -E "^(model|pp|tg|spec|\(mtp)" $L/$name.log | tee -a $OUT/summary.txt; }
bench mtp27 --model qwen3.5-27b --quant q4_k --spec mtp --spec-k 3 --oracle-accept 0.75 --gen 128 --spec-repeats 2
bench oracle27 --model qwen3.5-27b --quant q4_k --spec oracle --spec-k 3 --oracle-accept 0.75 --gen 128 --spec-repeats 2
MEMRA_CUDA_PROFILE=1 bench mtp27prof --model qwen3.5-27b --quant q4_k --spec mtp --spec-k 3 --oracle-accept 0.75 --gen 64 --spec-repeats 1
grep -E "^ *[0-9.]+ *%|kernel|graph" $L/mtp27prof.log | head -30 >> $OUT/summary.txt
MEMRA_CUDA_PROFILE=prefill bench 27b-prefill-prof --model qwen3.5-27b --quant q4_k --prompt-tokens 512 --gen-tokens 8 --repeats 1
grep -E "^ *[a-z_0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%" $L/27b-prefill-prof.log | head -20 >> $OUT/summary.txt
for q in q4_k q8_0 bf16; do
  bench 27b-$q --model qwen3.5-27b --quant $q --depth 0,4096,32768 --gen-tokens 64
  bench 8b-$q --model qwen3-8b --quant $q --gen-tokens 64
done
t end; tar czf $OUT/logs.tar.gz -C $OUT logs; rm -rf $OUT/logs
