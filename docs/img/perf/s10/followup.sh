#!/usr/bin/env bash
# Session 10 (#10): the AMX FP8 follow-ups (row-major A buffers, shared and parallel x
# preparation) against the first AMX commit, both with AMX on, interleaved: prefill 512 and
# batch-1 decode of the FP8 files. Usage: followup.sh BASE NEW OUT [ROUNDS]
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
    run "prefill dense fp8 $tag" "$b" dense-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
    run "prefill moe fp8 $tag" "$b" moe-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
    run "decode dense fp8 $tag" "$b" dense-0-fp8 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
    run "decode moe fp8 $tag" "$b" moe-0-fp8 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
  done
done
