#!/usr/bin/env bash
# Prefill tok/s of two densa binaries, batch 1, in interleaved rounds (which binary goes first
# alternates per round): a 4,096-token prompt on the MoE shape with FP8 weights and BF16 KV (the
# prefill role) and with INT4 g32 weights and FP8 KV (one server for both phases), and a
# 512-token prompt on the dense shape with FP8 weights.
# usage: prefill_ab.sh OLD_BINARY NEW_BINARY OUT_FILE ROUNDS [MODEL_DIR]
set -u
old=$1 new=$2 out=$3 rounds=$4 dir=${5:-/tmp/densa-perf-models}
: > "$out"
cases=("moe-0-fp8 4096 bf16" "moe-0-int4 4096 fp8" "dense-0-fp8 512 bf16")
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for c in "${cases[@]}"; do
    set -- $c
    for which in $order; do
      bin=$old; [ "$which" = new ] && bin=$new
      line=$("$bin" bench offline -m "$dir/$1" --batch 1 --prompt-len "$2" --gen-len 1 --repeats 1 \
        --kv-dtype "$3" 2>&1 | grep -E '^prefill:' | tr '\n' ' ')
      echo "round $r $1 prompt $2 kv $3 $which | $line | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out"
    done
  done
done
