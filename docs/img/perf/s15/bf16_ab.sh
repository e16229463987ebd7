#!/usr/bin/env bash
# BF16 weights: --bf16-activations auto (AMX tiles, x rounded to bf16) against f32 (fp32 x on
# FMAs), one binary, the order alternating per round. Usage: bf16_ab.sh DENSA MODEL OUT ROUNDS [ARGS...]
set -euo pipefail
densa=$1 model=$2 out=$3 rounds=$4
shift 4
: > "$out"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="auto f32"; else order="f32 auto"; fi
  for mode in $order; do
    line=$("$densa" bench offline -m "$model" --bf16-activations "$mode" "$@" 2>/dev/null | grep -E "prefill|decode" | tr '\n' ' ')
    echo "round $r $mode: $line" | tee -a "$out"
  done
done
