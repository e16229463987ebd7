#!/usr/bin/env bash
# Session 8 (#10): GEMMs with x in L2-sized blocks. BASE vs NEW prefill, interleaved, three
# rounds: one 512-token prompt (INT4 g32, FP8) and 16 prompts of 512 in one step (INT4, Q8_0 MoE).
# Usage: xblock.sh BASE NEW OUT
set -u
BASE=$1; NEW=$2; OUT=$3
M=${MODEL_DIR:-/tmp/densa-perf-models}
run() {  # label binary model extra...
  local label=$1 bin=$2 model=$3; shift 3
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($bin bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:' | tr '\n' ' ')" | tee -a "$OUT"
}
for i in 1 2 3; do
  for tag in base new; do
    b=$BASE; [ $tag = new ] && b=$NEW
    run "prefill dense int4-1x512 $tag" "$b" dense-0-int4 --batch 1 --prompt-len 512 --gen-len 1 --repeats 2
    run "prefill dense fp8-1x512 $tag" "$b" dense-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 2
    run "prefill moe fp8-1x512 $tag" "$b" moe-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 2
    run "prefill dense int4-16x512 $tag" "$b" dense-0-int4 --batch 16 --prompt-len 512 --gen-len 1 --repeats 1 --no-routing-replay
    run "prefill moe q8_0-16x512 $tag" "$b" moe-0-q8_0.gguf --batch 16 --prompt-len 512 --gen-len 1 --repeats 1 --no-routing-replay
  done
done
