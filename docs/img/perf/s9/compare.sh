#!/usr/bin/env bash
# Session 9 (#10): on a 2-core Emerald Rapids VM, batch-1 decode (prompt 16, 128 generated,
# median of 3 per run) of the HF INT4 g32 checkpoints (int4-g32 head) and the GGUF Q4_0 files:
# BASE binary (tiles, no software prefetch), NEW binary with tiles, NEW with --int4-layout rows,
# interleaved, ROUNDS rounds; membw (1 GiB and 192 MiB reads) before, between and after.
# Usage: compare.sh BASE NEW OUT [ROUNDS]; summarize with summarize.py OUT.
set -u
BASE=$1; NEW=$2; OUT=$3; ROUNDS=${4:-4}
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { $MEMBW --benchmark_min_time=0.5 2>&1 | grep 'threads:2' | sed 's/membw\/read_\([^/]*\)\/.*GB=/membw \1 | GB=/' | tee -a "$OUT"; }
run() {  # label binary model extra...
  local label=$1 bin=$2 model=$3; shift 3
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($bin bench offline -m $M/$model "$@" 2>&1 | grep -E 'decode:|achieved:' | tr '\n' ' ')" | tee -a "$OUT"
}
D="--batch 1 --prompt-len 16 --gen-len 128 --repeats 3"
bw
for i in $(seq 1 "$ROUNDS"); do
  for m in dense moe; do
    run "$m int4 base" "$BASE" $m-0-int4 $D --lm-head-dtype int4-g32
    run "$m int4 tiles" "$NEW" $m-0-int4 $D --lm-head-dtype int4-g32
    run "$m int4 rows" "$NEW" $m-0-int4 $D --lm-head-dtype int4-g32 --int4-layout rows
    run "$m q4_0 base" "$BASE" $m-0-q4_0.gguf $D
    run "$m q4_0 tiles" "$NEW" $m-0-q4_0.gguf $D
    run "$m q4_0 rows" "$NEW" $m-0-q4_0.gguf $D --int4-layout rows
  done
  bw
done
