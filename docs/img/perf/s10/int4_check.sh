#!/usr/bin/env bash
# Session 10 (#10): batch-1 INT4 decode and prefill, session 9's binary (51b6a5d) vs this
# session's (the shared x preparation touches every quantized dtype), interleaved.
# Usage: int4_check.sh BASE NEW OUT [ROUNDS]
set -u
BASE=$1; NEW=$2; OUT=$3; ROUNDS=${4:-3}
M=${MODEL_DIR:-/tmp/densa-perf-models}
run() {  # label binary model extra...
  local label=$1 bin=$2 model=$3; shift 3
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($bin bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:' | tr '\n' ' ')" | tee -a "$OUT"
}
for i in $(seq 1 "$ROUNDS"); do
  for tag in base new; do
    b=$BASE; [ $tag = new ] && b=$NEW
    run "decode dense int4 $tag" "$b" dense-0-int4 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
    run "decode moe int4 $tag" "$b" moe-0-int4 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
    run "prefill dense int4 $tag" "$b" dense-0-int4 --batch 1 --prompt-len 512 --gen-len 1 --repeats 2
  done
done
