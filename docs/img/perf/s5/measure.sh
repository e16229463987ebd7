#!/usr/bin/env bash
# Session 5 interleaved A/B (#10): batch-1 INT4 g32 decode, int4-g32 head, base vs new binary.
# Usage: measure.sh BASE NEW OUT
set -u
BASE=$1; NEW=$2; OUT=$3
M=${MODEL_DIR:-/tmp/densa-perf-models}
D1="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3 --lm-head-dtype int4-g32"
for i in 1 2 3 4 5; do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      echo "$tag $m | load $(uptime | sed 's/.*load average: //') | $($b bench offline -m $M/$m-0-int4 $D1 2>&1 | grep -E 'decode:')" | tee -a "$OUT"
    done
  done
done
