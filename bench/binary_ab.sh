#!/usr/bin/env bash
# Two densa binaries (e.g. before and after a refactor) on one `densa bench offline` row, the
# order alternating per round so both see the same minutes of a noisy machine; writes
# "round R A|B: prefill/decode lines" to OUT (replaced). Build each binary from its commit
# first (the A/B table in docs/performance/structure-ab.md names both).
# Usage: bench/binary_ab.sh DENSA_A DENSA_B MODEL OUT ROUNDS [BENCH_ARGS...]
set -euo pipefail
a=$1 b=$2 model=$3 out=$4 rounds=$5
shift 5
: > "$out"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="A B"; else order="B A"; fi
  for side in $order; do
    if [ "$side" = A ]; then bin=$a; else bin=$b; fi
    line=$("$bin" bench offline -m "$model" "$@" 2>/dev/null | grep -E "^(prefill|decode):" | tr '\n' ' ')
    echo "round $r $side: $line" | tee -a "$out"
  done
done
