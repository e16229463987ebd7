#!/usr/bin/env bash
# The CPU speed rows of docs/performance/llamacpp.md, densa alone: writes the two
# random-weight shapes of issue #10 with `densa gen-model` and runs `densa bench offline` rows
# on them, recording `uptime` beside every row and the membw benchmark before and after.
#
# Usage: bench/perf_offline.sh DENSA OUT_DIR [--quick] [--shapes dense,moe] [--rows REGEX] [--membw EXE]
#   MODEL_DIR (default /tmp/densa-perf-models): generated checkpoints (kept out of the repo;
#   reused when present). THREADS (default: all cores).
# Writes OUT_DIR/<shape>-<row>.json, OUT_DIR/<shape>-<row>.txt, OUT_DIR/load.txt,
# OUT_DIR/membw.txt and OUT_DIR/perf.md (the tables).
# --quick: a small shape (hidden 256, 2 layers) and short runs: a smoke test of the pipeline.
set -euo pipefail

DENSA=$1
OUT=$2
shift 2
QUICK=0
SHAPES=dense,moe
ROWS=.
MEMBW=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --shapes) SHAPES=$2; shift ;;
    --rows) ROWS=$2; shift ;;
    --membw) MEMBW=$2; shift ;;
    *) echo "usage: $0 DENSA OUT_DIR [--quick] [--shapes dense,moe] [--rows REGEX] [--membw EXE]" >&2; exit 2 ;;
  esac
  shift
done
MD=${MODEL_DIR:-/tmp/densa-perf-models}
THREADS=${THREADS:-0}
mkdir -p "$MD" "$OUT"
log() { echo "== perf: $*" >&2; }

# shellcheck source=bench/perf_common.sh
. "$(dirname "$0")/perf_common.sh"
membw() { perf_membw "$MEMBW" "$OUT/membw.txt" "$1"; }
gen() { perf_gen "$DENSA" "$MD" "$QUICK" "$@"; }

# row SHAPE NAME MODEL ARGS...
row() {
  local shape=$1 name=$2 model=$3
  shift 3
  [[ "$shape-$name" =~ $ROWS ]] || return 0
  local load
  load=$(uptime | sed 's/.*load average: //')
  log "$shape $name (load $load)"
  "$DENSA" bench offline -m "$model" --threads "$THREADS" --json "$OUT/$shape-$name.json" "$@" | tee "$OUT/$shape-$name.txt"
  echo "$shape-$name $(date -u +%H:%M:%SZ) load-before: $load load-after: $(uptime | sed 's/.*load average: //')" >> "$OUT/load.txt"
}

perf_sizes "$QUICK"

: >> "$OUT/load.txt"
membw "before"
for shape in ${SHAPES//,/ }; do
  q4=$(gen "$shape" q4_0 gguf)
  q8=$(gen "$shape" q8_0 gguf)
  i4=$(gen "$shape" int4 hf)
  f8=$(gen "$shape" fp8 hf)
  b16=$(gen "$shape" bf16 hf)
  row "$shape" decode1-int4 "$i4" "${D1[@]}"
  row "$shape" decode1-int4-headfp8 "$i4" "${D1[@]}" --lm-head-dtype fp8
  row "$shape" decode1-int4-headint4 "$i4" "${D1[@]}" --lm-head-dtype int4-g32
  row "$shape" decode1-q4_0 "$q4" "${D1[@]}"
  row "$shape" decode1-q8_0 "$q8" "${D1[@]}"
  row "$shape" prefill-fp8 "$f8" "${PF[@]}"
  row "$shape" prefill-q8_0 "$q8" "${PF[@]}"
  row "$shape" prefill-bf16 "$b16" "${PF[@]}"
  row "$shape" prefill-q4_0 "$q4" "${PF[@]}"
  if [ "$shape" = moe ]; then
    row "$shape" agg-q8_0-bf16kv "$q8" "${AGG[@]}" --kv-dtype bf16
    row "$shape" agg-q8_0-fp8kv "$q8" "${AGG[@]}" --kv-dtype fp8
    row "$shape" ctx-q8_0-bf16kv "$q8" "${CTX[@]}" --kv-dtype bf16
    row "$shape" ctx-q8_0-fp8kv "$q8" "${CTX[@]}" --kv-dtype fp8
    row "$shape" ctx-int4-bf16kv "$i4" "${CTX[@]}" --kv-dtype bf16 --lm-head-dtype fp8
    row "$shape" ctx-int4-fp8kv "$i4" "${CTX[@]}" --kv-dtype fp8 --lm-head-dtype fp8
  fi
done
membw "after"

python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    j = json.load(open(f))
    rows.append((os.path.basename(f)[:-5], j))
with open(os.path.join(out, "perf.md"), "w") as md:
    md.write("| row | weights | KV | batch | prompt | gen | prefill tok/s | decode tok/s | ms/step | "
             "weight MB/step | KV MB/step | weight GB/s | total GB/s | CPU share |\n")
    md.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for name, j in rows:
        md.write("| %s | %s | %s | %d | %d | %d | %.1f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f | %.2f |\n" % (
            name, j["weight_dtype"] + (" (head %s)" % j["lm_head_dtype"] if j.get("lm_head_dtype") else ""), j["kv_dtype"], j["batch"], j["prompt_len"], j["gen_len"],
            j["prefill_tok_s"], j["decode_tok_s"], j["decode_step_ms"], j["weight_bytes_per_step"] / 1e6,
            j["kv_bytes_per_step"] / 1e6, j["weight_gbs"], j["total_gbs"], j.get("cpu_share", 0)))
print(open(os.path.join(out, "perf.md")).read())
EOF
