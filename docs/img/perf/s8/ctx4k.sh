#!/usr/bin/env bash
# Session 8 (#10): decode at 4,096 tokens of context, MoE shape, BF16 vs FP8 KV, INT4 g32
# (int4-g32 head) and GGUF Q4_0, default 16-token pages, three interleaved rounds of one run each
# (prompt 4096, 128 generated). Usage: ctx4k.sh DENSA OUT
set -u
B=$1; OUT=$2
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
run() {  # label model extra...
  local label=$1 model=$2; shift 2
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($B bench offline -m $M/$model --batch 1 --prompt-len 4096 --gen-len 128 --repeats 1 "$@" 2>&1 | grep -E 'decode:' | tr '\n' ' ')" | tee -a "$OUT"
}
bw
for i in 1 2 3; do
  for kv in bf16 fp8; do
    run "4k moe int4 $kv" moe-0-int4 --lm-head-dtype int4-g32 --kv-dtype $kv
    run "4k moe q4_0 $kv" moe-0-q4_0.gguf --kv-dtype $kv
  done
done
bw
