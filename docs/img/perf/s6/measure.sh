#!/usr/bin/env bash
# Session 6 measurements (#10). Usage: measure.sh BASE NEW OUT
#  A: batch-1 INT4 g32 decode (int4-g32 head), base vs new binary, five interleaved rounds.
#  B: decode at 4,096 tokens of context (MoE INT4, int4-g32 head), new binary, KV page size
#     16 / 32 / 64 / 128 tokens with FP8 KV and 128 with BF16 KV, three interleaved rounds.
set -u
BASE=$1; NEW=$2; OUT=$3
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
bw
D1="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3 --lm-head-dtype int4-g32"
for i in 1 2 3 4 5; do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      echo "A $tag $m | load $(uptime | sed 's/.*load average: //') | $($b bench offline -m $M/$m-0-int4 $D1 2>&1 | grep -E 'decode:')" | tee -a "$OUT"
    done
  done
done
bw
D4="--batch 1 --prompt-len 4096 --gen-len 128 --repeats 2 --lm-head-dtype int4-g32"
for i in 1 2 3; do
  for cfg in "fp8 16" "fp8 32" "fp8 64" "fp8 128" "bf16 128"; do
    set -- $cfg
    echo "B new kv $1 page $2 | load $(uptime | sed 's/.*load average: //') | $($NEW bench offline -m $M/moe-0-int4 $D4 --kv-dtype $1 --page-size $2 2>&1 | grep -E 'prefill:|decode:' | tr '\n' ' ')" | tee -a "$OUT"
  done
done
bw
