#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32, AMX attention: binary A against binary B
# (the K / V prefetch distance, 4 vs 8 tiles), BF16 and FP8 KV, interleaved rounds.
# usage: ahead.sh A B OUT_FILE ROUNDS [MODEL]
set -u
a=$1 b=$2 out=$3 rounds=$4 model=${5:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  for kv in bf16 fp8; do
    for which in A B; do
      bin=$a; [ $which = B ] && bin=$b
      line=$(DENSA_AMX=1 "$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
        --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
      echo "round $r kv $kv $which | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
