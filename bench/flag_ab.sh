#!/usr/bin/env bash
# One binary, one `densa bench offline` flag at two values, the order alternating per round
# (so both see the same minutes of a noisy machine); writes "round R VALUE: prefill/decode
# lines" to OUT (replaced).
# Usage: bench/flag_ab.sh DENSA MODEL OUT ROUNDS FLAG VALUE_A VALUE_B [BENCH_ARGS...]
set -euo pipefail
densa=$1 model=$2 out=$3 rounds=$4 flag=$5 a=$6 b=$7
shift 7
: > "$out"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="$a $b"; else order="$b $a"; fi
  for value in $order; do
    line=$("$densa" bench offline -m "$model" "$flag" "$value" "$@" 2>/dev/null | grep -E "^(prefill|decode):" | tr '\n' ' ')
    echo "round $r $value: $line" | tee -a "$out"
  done
done
