#!/usr/bin/env bash
# Quiet-machine A/B for session 4 (#10). Usage: measure.sh OUTDIR
set -u
OUT=$1; mkdir -p $OUT
M=/tmp/densa-perf-models
AB=/tmp/ab
L() { uptime | sed 's/.*load average: //'; }
run() { local tag=$1; shift; echo "$tag | load $(L) | $("$@" 2>&1 | grep -E 'prefill:|decode:|bytes per decode' | tr '\n' ' ')" | tee -a $OUT/log.txt; }
echo "membw before $(L)" >> $OUT/log.txt
/work/main/build/membw_bench --benchmark_min_time=1 2>&1 | grep -E '^BM_|membw' >> $OUT/log.txt
D1="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3"
for i in 1 2; do
  for m in dense moe; do
    run "base $m decode1 int4" $AB/densa-base bench offline -m $M/$m-0-int4 $D1
    run "final $m decode1 int4" $AB/densa-final bench offline -m $M/$m-0-int4 $D1
    run "final $m decode1 int4 head-fp8" $AB/densa-final bench offline -m $M/$m-0-int4 $D1 --lm-head-dtype fp8
    run "final $m decode1 int4 head-int4" $AB/densa-final bench offline -m $M/$m-0-int4 $D1 --lm-head-dtype int4-g32
  done
done
for i in 1 2; do
  run "dyn dense decode1 int4" $AB/densa-ab bench offline -m $M/dense-0-int4 $D1
  AB_STATIC=1 run "static dense decode1 int4" env AB_STATIC=1 $AB/densa-ab bench offline -m $M/dense-0-int4 $D1
done
CTX="--batch 1 --prompt-len 4096 --gen-len 32 --repeats 1"
run "base moe ctx4k int4 fp8kv" $AB/densa-base bench offline -m $M/moe-0-int4 $CTX --kv-dtype fp8
run "final moe ctx4k int4 fp8kv head-fp8" $AB/densa-final bench offline -m $M/moe-0-int4 $CTX --kv-dtype fp8 --lm-head-dtype fp8
run "final moe ctx4k int4 bf16kv head-fp8" $AB/densa-final bench offline -m $M/moe-0-int4 $CTX --kv-dtype bf16 --lm-head-dtype fp8
run "final moe ctx4k int4 fp8kv head-int4" $AB/densa-final bench offline -m $M/moe-0-int4 $CTX --kv-dtype fp8 --lm-head-dtype int4-g32
for i in 1 2; do for v in old new; do echo "attn $v $(L) $($AB/$v --benchmark_filter='shape:1' --benchmark_min_time=0.5 --benchmark_repetitions=3 2>&1 | grep -E '_median' | awk '{printf "%s %s | ", $1, $2}' | sed 's/BM_DecodeAttention\/ctx:4096\///g')" >> $OUT/log.txt; done; done
echo "membw after $(L)" >> $OUT/log.txt
/work/main/build/membw_bench --benchmark_min_time=1 2>&1 | grep -E '^BM_|membw' >> $OUT/log.txt
