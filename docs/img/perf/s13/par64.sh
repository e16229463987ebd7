#!/usr/bin/env bash
# 64 parallel decode on the MoE shape (FP8 weights, 128 in / 32 out) with FP8 KV, two binaries in
# interleaved rounds, which one goes first alternating per round.
# usage: par64.sh OLD_BINARY NEW_BINARY OUT_FILE ROUNDS [MODEL]
set -u
old=$1 new=$2 out=$3 rounds=$4 model=${5:-/tmp/densa-perf-models/moe-0-fp8}
: > "$out"
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for which in $order; do
    bin=$old; [ "$which" = new ] && bin=$new
    line=$("$bin" bench offline -m "$model" --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype fp8 \
      --no-routing-replay 2>&1 | grep -E '^(prefill|decode):' | tr '\n' ' ')
    echo "round $r $which | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
  done
done
