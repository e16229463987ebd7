#!/usr/bin/env bash
# --int8-layout tiles against rows, one binary, the order alternating per round.
set -euo pipefail
densa=$1 model=$2 out=$3 rounds=$4
shift 4
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="tiles rows"; else order="rows tiles"; fi
  for mode in $order; do
    line=$("$densa" bench offline -m "$model" --int8-layout "$mode" "$@" 2>/dev/null | grep -E "^(prefill|decode):" | tr '\n' ' ')
    echo "round $r $mode: $line" | tee -a "$out"
  done
done
