#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32 (int4-g32 head): decode tok/s with BF16 KV and
# with FP8 KV (dynamic scales, the default), one binary, the process's attention path, in
# interleaved rounds (BF16 first in odd rounds, FP8 first in even ones).
# usage: attn4k_kv.sh DENSA_BINARY OUT_FILE ROUNDS [MODEL]
set -u
bin=$1 out=$2 rounds=$3 model=${4:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  order="bf16 fp8"; [ $((r % 2)) -eq 0 ] && order="fp8 bf16"
  for kv in $order; do
    line=$("$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
      --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
    echo "round $r kv $kv | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
  done
done
