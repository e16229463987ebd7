#!/usr/bin/env bash
# Session 6 (#10): batch-1 INT4 g32 decode (int4-g32 head) bracketed by membw, to set achieved
# weight GB/s against the bandwidth measured in the same minutes. Usage: roofline.sh DENSA OUT
set -u
B=$1; OUT=$2
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
D1="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3 --lm-head-dtype int4-g32"
for m in dense moe; do
  bw
  for i in 1 2 3 4 5; do
    echo "$m | load $(uptime | sed 's/.*load average: //') | $($B bench offline -m $M/$m-0-int4 $D1 2>&1 | grep -E 'decode:|achieved:' | tr '\n' ' ')" | tee -a "$OUT"
  done
done
bw
