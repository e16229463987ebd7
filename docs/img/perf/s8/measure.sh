#!/usr/bin/env bash
# Session 8 (#10): INT4 g32 row-major vs 8-row tiles (--int4-layout rows|tiles) in one binary,
# interleaved, batch-1 decode (prompt 16, 128 generated, median of 3 per run) and prefill 512.
# Usage: measure.sh DENSA OUT [ROUNDS]
set -u
B=$1; OUT=$2; ROUNDS=${3:-5}
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
D="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3"
P="--batch 1 --prompt-len 512 --gen-len 1 --repeats 3"
run() {  # label model extra...
  local label=$1 model=$2; shift 2
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($B bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:|achieved:' | tr '\n' ' ')" | tee -a "$OUT"
}
bw
for i in $(seq 1 "$ROUNDS"); do
  for L in rows tiles; do
    run "decode dense int4 $L" dense-0-int4 $D --lm-head-dtype int4-g32 --int4-layout $L
    run "decode moe int4 $L" moe-0-int4 $D --lm-head-dtype int4-g32 --int4-layout $L
    run "decode dense q4_0 $L" dense-0-q4_0.gguf $D --int4-layout $L
    run "decode moe q4_0 $L" moe-0-q4_0.gguf $D --int4-layout $L
  done
  [ "$i" = 3 ] && bw
done
for i in 1 2 3; do
  for L in rows tiles; do
    run "prefill dense int4 $L" dense-0-int4 $P --int4-layout $L
    run "prefill moe int4 $L" moe-0-int4 $P --int4-layout $L
    run "prefill dense q4_0 $L" dense-0-q4_0.gguf $P --int4-layout $L
    run "prefill moe q4_0 $L" moe-0-q4_0.gguf $P --int4-layout $L
  done
done
bw
