#!/usr/bin/env bash
# Session 9 (#10): the INT8 (GGUF Q8_0) kernel in 128-column steps (two vpdpbusd per conversion
# and fma instead of one; ea0cd5a). BASE vs NEW, interleaved: 64 parallel
# decode on the MoE shape (128 in / 32 out, FP8 KV, as the issue's row) and prefill 512 of the
# dense and MoE Q8_0 files. Usage: int8_gemm.sh BASE NEW OUT [ROUNDS]
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
    run "par64 moe q8_0 $tag" "$b" moe-0-q8_0.gguf --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype fp8 --no-routing-replay
    run "prefill dense q8_0 $tag" "$b" dense-0-q8_0.gguf --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
    run "prefill moe q8_0 $tag" "$b" moe-0-q8_0.gguf --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
  done
done
