#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32 (int4-g32 head): decode tok/s of two densa
# binaries with BF16 and FP8 KV (dynamic scales), the process's own attention path, in
# interleaved rounds; which binary goes first alternates per round.
# usage: attn4k_ab.sh OLD_BINARY NEW_BINARY OUT_FILE ROUNDS [MODEL]
set -u
old=$1 new=$2 out=$3 rounds=$4 model=${5:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for kv in bf16 fp8; do
    for which in $order; do
      bin=$old; [ "$which" = new ] && bin=$new
      line=$("$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
        --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
      echo "round $r kv $kv $which | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
