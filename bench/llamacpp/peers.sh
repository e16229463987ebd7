#!/usr/bin/env bash
# Issue #37's rows: prefill and batch-1 decode of densa against ik_llama.cpp and llama.cpp on the
# same GGUF files, the engines run in turn, the order rotating every round.
#
# Usage: bench/llamacpp/peers.sh DENSA OUT_DIR [ROUNDS] [--rows REGEX] [--quick]
#   IK_LLAMA_BENCH (required): ik_llama.cpp's llama-bench (bench/llamacpp/build_ik_llama.sh).
#   MODEL_DIR (default /tmp/densa-perf-models): the files, written once with `densa gen-model
#   --tokenizer bytes`: dense-336m and moe-959m-a336m in Q4_0 and Q8_0, and with A3B=1 the
#   30B-A3B-class shape (hidden 2048, 48 layers, 128 experts top-8 of width 768, vocab 151,936)
#   in Q4_0 (17 GB: it needs that much disk, and memory for one engine's copy at a time).
#   THREADS (default 2).
#   ENGINES (default "ik llama densa densa_noamx"): the engines to run, e.g. without densa_noamx
#   on a CPU without AMX, where it would run densa's kernels a second time.
# Engines per row: ik_llama.cpp (-fmoe 1, F16 KV), llama.cpp (node-llama-cpp's prebuilt binaries,
# F16 KV, flash attention), densa as the CPU runs it, and densa with DENSA_AMX=0 (its kernels as
# on a CPU without AMX: the AVX-512 VNNI paths; the peers do not use AMX on these files here
# except llama.cpp's Q4_0 / Q8_0 repack, see llamacpp.md).
# Rows: SHAPE_KIND_FORMAT, KIND prefill (a 512-token prompt; 256 for a3b) or decode1 (batch 1:
# llama.cpp and densa decode 128 tokens after 16, ik_llama.cpp 128 from an empty context).
# Writes OUT_DIR/raw.txt (one line per run: round, row, engine, tok/s), OUT_DIR/summary.md
# (bench/llamacpp/peers_summary.py) and, with int8_peak_bench beside DENSA (or PEAK naming it),
# OUT_DIR/roofline.md: the prefill rows' GOPS against the int8 peak (bench/llamacpp/roofline.py).
set -euo pipefail

# shellcheck source=bench/llamacpp/engines.sh
. "$(dirname "$0")/engines.sh"
bench_args "$@"
[ -n "${IK_LLAMA_BENCH:-}" ] || { echo "peers.sh: set IK_LLAMA_BENCH to ik_llama.cpp's llama-bench" >&2; exit 2; }
MD=${MODEL_DIR:-/tmp/densa-perf-models}
mkdir -p "$MD"
# shellcheck source=bench/perf_common.sh
. "$HERE/../perf_common.sh"

declare -A M
rows=()
for shape in dense moe; do
  for d in q4_0 q8_0; do
    f=$(perf_gen "$DENSA" "$MD" "$QUICK" "$shape" "$d" gguf --tokenizer bytes)
    M[$shape-$d]=$f
    rows+=("${shape}_prefill_$d" "${shape}_decode1_$d")
  done
done
if [ "${A3B:-0}" = 1 ]; then
  a3b=(--arch qwen3_moe --hidden 2048 --layers 48 --heads 32 --kv-heads 4 --head-dim 128 --moe-ffn 768 --ffn 768
       --experts 128 --top-k 8 --vocab 151936)
  [ "$QUICK" = 1 ] && a3b=(--arch qwen3_moe --hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --moe-ffn 128
                           --ffn 128 --experts 16 --top-k 4 --vocab 4096)
  f=$MD/a3b48-$QUICK-vocab-q4_0.gguf
  if [ ! -e "$f" ]; then
    echo "== peers: gen-model a3b q4_0 -> $f" >&2
    "$DENSA" gen-model "${a3b[@]}" --tokenizer bytes --dtype q4_0 --format gguf "$f.tmp" >&2
    mv "$f.tmp" "$f"
  fi
  M[a3b-q4_0]=$f
  rows+=(a3b_prefill_q4_0 a3b_decode1_q4_0)
fi

PF=512 GEN=128
[ "$QUICK" = 1 ] && PF=64 GEN=16
RAW=$OUT/raw.txt
: > "$RAW"
log_run() { echo "round $1 $2 $3 $4" >> "$RAW"; echo "== peers: round $1 $2 $3 $4" >&2; }
field() { python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# run_engine ROUND ROW ENGINE: one run of ENGINE on ROW, its tok/s appended to raw.txt.
run_engine() {
  local r=$1 row=$2 engine=$3
  local shape=${row%%_*} rest=${row#*_}
  local kind=${rest%%_*} fmt=${rest#*_}
  local model=${M[$shape-$fmt]} prompt=$PF
  [ "$shape" = a3b ] && prompt=$((PF / 2))
  local json=$OUT/round-$r/$row.$engine.json metric=prefill_tok_s
  mkdir -p "$OUT/round-$r"
  local dargs=(--batch 1 --prompt-len "$prompt" --gen-len 2 --repeats 2)
  local largs=(--batch 1 --prompt-len "$prompt" --gen-len 2 --repeats 2)
  if [ "$kind" = decode1 ]; then
    metric=decode_tok_s
    dargs=(--batch 1 --prompt-len 16 --gen-len "$GEN" --repeats 2)
    largs=(--batch 1 --prompt-len 16 --gen-len "$GEN" --repeats 2)
  fi
  case $engine in
    ik)
      local p=0 n=0 mode=tg
      if [ "$kind" = prefill ]; then p=$prompt; mode=pp; else n=$GEN; fi
      "$IK_LLAMA_BENCH" -m "$model" -p "$p" -n "$n" -t "$THREADS" -r 3 -fmoe 1 -o json 2>/dev/null \
        | python3 "$HERE/ikllama_json.py" "$mode" > "$json" ;;
    llama)
      (cd "$HERE" && node llamacpp_bench.mjs -m "$model" --kv-dtype f16 --threads "$THREADS" --json "$json" \
         "${largs[@]}") > /dev/null ;;
    densa)
      "$DENSA" bench offline -m "$model" --threads "$THREADS" --json "$json" "${dargs[@]}" > /dev/null ;;
    densa_noamx)
      DENSA_AMX=0 "$DENSA" bench offline -m "$model" --threads "$THREADS" --json "$json" "${dargs[@]}" > /dev/null ;;
  esac
  log_run "$r" "$row" "$engine" "$(field "$json" "$metric")"
}

read -r -a engines <<< "${ENGINES:-ik llama densa densa_noamx}"
for ((r = 1; r <= ROUNDS; r++)); do
  for row in "${rows[@]}"; do
    [[ "$row" =~ $ROWS ]] || continue
    # Rotate the order by round so no engine always runs first (or right after a warm cache).
    for ((k = 0; k < ${#engines[@]}; k++)); do
      run_engine "$r" "$row" "${engines[$(((k + r - 1) % ${#engines[@]}))]}"
    done
  done
done
python3 "$HERE/peers_summary.py" "$RAW" > "$OUT/summary.md"
cat "$OUT/summary.md"
# The compute roofline of the prefill rows against the int8 peak (int8_peak_bench beside DENSA).
PEAK=${PEAK:-$(dirname "$DENSA")/int8_peak_bench}
if [ -x "$PEAK" ]; then
  for shape in "${!M[@]}"; do "$DENSA" info -m "${M[$shape]}" > "$OUT/info-${shape%%-*}.txt"; done
  "$PEAK" --benchmark_min_time=1 --benchmark_format=json > "$OUT/int8_peak.json"
  python3 "$HERE/roofline.py" "$RAW" "$OUT" "$OUT/int8_peak.json" > "$OUT/roofline.md"
  cat "$OUT/roofline.md"
fi
