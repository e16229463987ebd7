#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32 (int4-g32 head): decode tok/s of two densa
# binaries with BF16 and FP8 KV, in interleaved rounds (the process's own attention path: AMX
# tiles for BF16 pages where the CPU has them, AVX-512 for FP8).
# usage: attn4k_ab.sh OLD_BINARY NEW_BINARY OUT_FILE ROUNDS [MODEL]
set -u
old=$1 new=$2 out=$3 rounds=$4 model=${5:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  for kv in bf16 fp8; do
    for which in old new; do
      bin=$old; [ "$which" = new ] && bin=$new
      line=$("$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
        --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
      echo "round $r kv $kv $which | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
