#!/usr/bin/env bash
# Session 7 measurements (#10): GGUF Q4_0 (FMT=q4_0, the default) or Q8_0 (FMT=q8_0) repacked
# at load against the base binary that decoded them with the exact fp32 kernel.
# Usage: [FMT=q8_0] measure.sh BASE NEW OUT
#  A: batch-1 decode of the GGUF files as written by gen-model (head in the same format),
#     five interleaved rounds; the HF INT4 g32 model (int4-g32 head) beside them for reference.
#  B: prefill of 512 tokens, base vs new, three interleaved rounds.
set -u
BASE=$1; NEW=$2; OUT=$3
F=${FMT:-q4_0}
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
load() { uptime | sed 's/.*load average: //'; }
bw
D1="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3"
for i in 1 2 3 4 5; do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      echo "A $tag $m $F | load $(load) | $($b bench offline -m $M/$m-0-$F.gguf $D1 2>&1 | grep -E 'decode:')" | tee -a "$OUT"
    done
    echo "A new $m int4-g32 | load $(load) | $($NEW bench offline -m $M/$m-0-int4 $D1 --lm-head-dtype int4-g32 2>&1 | grep -E 'decode:')" | tee -a "$OUT"
  done
done
bw
P="--batch 1 --prompt-len 512 --gen-len 1 --repeats 3"
for i in 1 2 3; do
  for m in dense moe; do
    for tag in base new; do
      b=$BASE; [ $tag = new ] && b=$NEW
      echo "B $tag $m $F | load $(load) | $($b bench offline -m $M/$m-0-$F.gguf $P 2>&1 | grep -E 'prefill:')" | tee -a "$OUT"
    done
  done
done
bw
