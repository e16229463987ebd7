# shellcheck shell=bash
# Shared by compare.sh and kquants.sh (sourced, not run): their command line, the load stamp
# and one run of each engine, its JSON named as summarize.py reads it.

# bench_args ARGS...: parses "DENSA OUT_DIR [ROUNDS] [--rows REGEX] [--quick]" of the calling
# script into DENSA (absolute), OUT (created, absolute, its round-N directories and load.txt
# emptied: a fresh run replaces the last one's results), ROUNDS (default 3), ROWS (default .),
# QUICK (0 or 1); HERE is this folder, THREADS defaults to 2.
# shellcheck disable=SC2034  # ROUNDS, ROWS and QUICK are the caller's
bench_args() {
  local usage="usage: $0 DENSA OUT_DIR [ROUNDS] [--rows REGEX] [--quick]"
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
  DENSA=$(realpath "$1")
  OUT=$2
  shift 2
  ROUNDS=3
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then ROUNDS=$1; shift; fi
  ROWS=.
  QUICK=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --rows) ROWS=$2; shift ;;
      --quick) QUICK=1 ;;
      *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
  done
  HERE=$(cd "$(dirname "$0")" && pwd)
  THREADS=${THREADS:-2}
  mkdir -p "$OUT"
  OUT=$(realpath "$OUT")
  rm -rf "$OUT"/round-*
  : > "$OUT/load.txt"
  [ -d "$HERE/node_modules/node-llama-cpp" ] || { echo "run $HERE/install.sh first" >&2; exit 2; }
}

# stamp LABEL: appends the time and the machine's load average to OUT/load.txt.
stamp() { echo "$1 $(date -u +%H:%M:%SZ) load: $(uptime | sed 's/.*load average: //')" >> "$OUT/load.txt"; }

# llama ROUND_DIR ROW MODEL KV BENCH_ARGS...: llama.cpp (llamacpp_bench.mjs) with KV dtype KV,
# into ROUND_DIR/ROW.llama-KV.json.
llama() {
  local dir=$1 row=$2 model=$3 kv=$4
  shift 4
  stamp "$(basename "$dir") $row.llama-$kv"
  (cd "$HERE" && node llamacpp_bench.mjs -m "$model" --kv-dtype "$kv" --threads "$THREADS" \
     --json "$dir/$row.llama-$kv.json" "$@") | sed "s/^/[$row llama.cpp $kv] /" >&2
}

# densa ROUND_DIR ROW CONFIG MODEL BENCH_ARGS...: `densa bench offline` into
# ROUND_DIR/ROW.densa-CONFIG.json.
densa() {
  local dir=$1 row=$2 config=$3 model=$4
  shift 4
  stamp "$(basename "$dir") $row.densa-$config"
  "$DENSA" bench offline -m "$model" --threads "$THREADS" --json "$dir/$row.densa-$config.json" "$@" \
    | grep -E '^(prefill|decode):' | sed "s/^/[$row densa $config] /" >&2
}

# ikllama ROUND_DIR ROW MODEL pp|tg TOKENS [EXTRA_ARGS...]: ik_llama.cpp's llama-bench (the binary
# IK_LLAMA_BENCH names, built from its public repository outside this one with
# -DGGML_NATIVE=ON; nothing happens when it is unset) with -fmoe 1 (its fused MoE FFN), F16 KV,
# THREADS threads and 3 repetitions: pp TOKENS = a prompt of TOKENS tokens processed as one
# sequence (prefill), tg TOKENS = TOKENS tokens generated one at a time from an empty context
# (batch-1 decode). Written to ROUND_DIR/ROW.ikllama.json in the fields summarize.py reads.
ikllama() {
  [ -n "${IK_LLAMA_BENCH:-}" ] || return 0
  local dir=$1 row=$2 model=$3 mode=$4 tokens=$5
  shift 5
  local p=0 n=0
  if [ "$mode" = pp ]; then p=$tokens; else n=$tokens; fi
  stamp "$(basename "$dir") $row.ikllama"
  "$IK_LLAMA_BENCH" -m "$model" -p "$p" -n "$n" -t "$THREADS" -r 3 -fmoe 1 -o json "$@" 2>/dev/null \
    | python3 "$HERE/ikllama_json.py" "$mode" > "$dir/$row.ikllama.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("prefill: %.1f tok/s" % j["prefill_tok_s"] if sys.argv[2]=="pp" else "decode:  %.2f tok/s" % j["decode_tok_s"])' \
    "$dir/$row.ikllama.json" "$mode" | sed "s/^/[$row ik_llama.cpp] /" >&2
}
