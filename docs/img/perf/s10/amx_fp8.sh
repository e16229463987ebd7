#!/usr/bin/env bash
# Session 10 (#10): FP8 weights on AMX tiles (tdpbf16ps) against the vdpbf16ps path, one
# binary, DENSA_AMX=0 vs 1, interleaved: prefill 512 and batch-1 decode of the dense and MoE
# FP8 files, and 64 parallel decode on the MoE shape (128 in / 32 out, FP8 KV).
# Usage: amx_fp8.sh DENSA OUT [ROUNDS]
set -u
BIN=$1; OUT=$2; ROUNDS=${3:-3}
M=${MODEL_DIR:-/tmp/densa-perf-models}
run() {  # label amx model extra...
  local label=$1 amx=$2 model=$3; shift 3
  echo "$label amx=$amx | load $(uptime | sed 's/.*load average: //') | $(DENSA_AMX=$amx $BIN bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:' | tr '\n' ' ')" | tee -a "$OUT"
}
for i in $(seq 1 "$ROUNDS"); do
  for amx in 0 1; do
    run "prefill dense fp8" $amx dense-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
    run "prefill moe fp8" $amx moe-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3
    run "decode dense fp8" $amx dense-0-fp8 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
    run "decode moe fp8" $amx moe-0-fp8 --batch 1 --prompt-len 16 --gen-len 128 --repeats 3
    run "par64 moe fp8" $amx moe-0-fp8 --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype fp8 --no-routing-replay
  done
done
