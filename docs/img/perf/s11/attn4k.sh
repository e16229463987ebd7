#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32 (int4-g32 head): decode tok/s with BF16 and FP8
# KV, attention on AMX tiles (DENSA_AMX=1) or on AVX-512 (DENSA_AMX=0), interleaved rounds.
# usage: attn4k.sh DENSA_BINARY OUT_FILE ROUNDS [MODEL]
set -u
bin=$1 out=$2 rounds=$3 model=${4:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  for kv in bf16 fp8; do
    for amx in 0 1; do
      line=$(DENSA_AMX=$amx "$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
        --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
      echo "round $r kv $kv amx $amx | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
