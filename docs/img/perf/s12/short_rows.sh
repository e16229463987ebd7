#!/usr/bin/env bash
# Session 12: the issue's short-context rows before (session 11's binary) and after the attention
# prefetch fix and FP8 pages on AMX tiles, both with AMX on, interleaved: prefill 512 of the dense
# and MoE FP8 files (BF16 KV), and 64 parallel decode on the MoE shape (128 in / 32 out) with
# BF16 KV and with FP8 KV (the issue's row: same or smaller KV memory).
# Usage: short_rows.sh OLD NEW OUT [ROUNDS]
set -u
OLD=$1; NEW=$2; OUT=$3; ROUNDS=${4:-3}
M=${MODEL_DIR:-/tmp/densa-perf-models}
: > "$OUT"
for i in $(seq 1 "$ROUNDS"); do
  for which in old new; do
    bin=$OLD; [ $which = new ] && bin=$NEW
    for args in "dense-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3" \
                "moe-0-fp8 --batch 1 --prompt-len 512 --gen-len 1 --repeats 3" \
                "moe-0-fp8 --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype bf16 --no-routing-replay" \
                "moe-0-fp8 --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype fp8 --no-routing-replay"; do
      set -- $args
      model=$1; shift
      echo "round $i $which | $model $* | $(DENSA_AMX=1 $bin bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:' | tr '\n' ' ') | load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT"
    done
  done
done
