#!/usr/bin/env bash
# Session 8 (#10): BASE binary vs NEW binary, interleaved, on the preset shapes: batch-1 decode
# (prompt 16, 128 generated, median of 3 per run) of the HF INT4 g32 checkpoints (int4-g32 head)
# and the GGUF Q4_0 files, ROUNDS rounds; then prefill 512, three rounds; membw around them.
# Usage: compare.sh BASE NEW OUT [ROUNDS]; summarize with summarize.py OUT.
set -u
BASE=$1; NEW=$2; OUT=$3; ROUNDS=${4:-5}
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
run() {  # label binary model extra...
  local label=$1 bin=$2 model=$3; shift 3
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($bin bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:|achieved:' | tr '\n' ' ')" | tee -a "$OUT"
}
D="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3"
P="--batch 1 --prompt-len 512 --gen-len 1 --repeats 3"
bw
for i in $(seq 1 "$ROUNDS"); do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      run "decode $m int4 $tag" "$b" $m-0-int4 $D --lm-head-dtype int4-g32
      run "decode $m q4_0 $tag" "$b" $m-0-q4_0.gguf $D
    done
  done
  [ "$i" = 3 ] && bw
done
bw
for i in 1 2 3; do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      run "prefill $m int4 $tag" "$b" $m-0-int4 $P
      run "prefill $m q4_0 $tag" "$b" $m-0-q4_0.gguf $P
    done
  done
done
bw
