#!/usr/bin/env bash
# 4,096 tokens of context, batch 1, MoE INT4 g32: KV pool in 4 KiB pages (OLD binary) against
# huge pages (NEW), AMX attention; and NEW with AVX-512 attention. Interleaved rounds.
# usage: huge_kv.sh OLD NEW OUT_FILE ROUNDS [MODEL]
set -u
old=$1 new=$2 out=$3 rounds=$4 model=${5:-/tmp/densa-perf-models/moe-0-int4}
: > "$out"
for r in $(seq 1 "$rounds"); do
  for kv in bf16 fp8; do
    for cfg in "old 1" "new 1" "new 0"; do
      set -- $cfg
      bin=$old; [ "$1" = new ] && bin=$new
      line=$(DENSA_AMX=$2 "$bin" bench offline -m "$model" --batch 1 --prompt-len 4096 --gen-len 256 \
        --repeats 1 --lm-head-dtype int4-g32 --kv-dtype $kv 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
      echo "round $r kv $kv $1 amx $2 | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
