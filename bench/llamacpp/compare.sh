#!/usr/bin/env bash
# densa against llama.cpp on this machine, on issue #10's rows, the two engines run in turn.
#
# Usage: bench/llamacpp/compare.sh DENSA OUT_DIR [ROUNDS] [--rows REGEX] [--quick]
#   MODEL_DIR (default /tmp/densa-perf-models): checkpoints written with `densa gen-model`
#   (reused when present): GGUF Q4_0 / Q8_0 / F16 with `--tokenizer bytes` (llama.cpp needs a
#   vocabulary to load a file), both engines reading the same files, plus densa's own INT4 g32
#   and FP8 Hugging Face checkpoints. THREADS (default 2).
# Needs node and bench/llamacpp/install.sh run once (node-llama-cpp's prebuilt CPU
# binaries from the npm registry: upstream llama.cpp with ggml's per-CPU variants).
# IK_LLAMA_BENCH (optional): ik_llama.cpp's llama-bench, built outside this repository
# (bench/llamacpp/build_ik_llama.sh); its decode and prefill rows then run as a second peer.
#
# Each round runs every row's llama.cpp and densa configurations back to back, llama.cpp first
# in odd rounds and densa first in even ones, so both see the same minutes of this shared VM.
# Writes OUT_DIR/round-N/<row>.<engine-config>.json, OUT_DIR/load.txt, OUT_DIR/membw.txt
# (when MEMBW names membw_bench) and OUT_DIR/summary.md (bench/llamacpp/summarize.py),
# replacing an earlier run's.
# --quick: a small shape and short runs, a smoke test of the pipeline.
set -euo pipefail

# shellcheck source=bench/llamacpp/engines.sh
. "$(dirname "$0")/engines.sh"
bench_args "$@"
MD=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-}
mkdir -p "$MD"
: > "$OUT/membw.txt"
log() { echo "== compare: $*" >&2; }

# shellcheck source=bench/perf_common.sh
. "$HERE/../perf_common.sh"
gen() { perf_gen "$DENSA" "$MD" "$QUICK" "$@"; }
membw() { perf_membw "$MEMBW" "$OUT/membw.txt" "$1"; }

perf_sizes "$QUICK"
# The row sizes as ik_llama.cpp's llama-bench takes them: decode TOKENS and prefill TOKENS.
flag_value() { local flag=$1; shift; while [ $# -gt 1 ]; do [ "$1" = "$flag" ] && { echo "$2"; return; }; shift; done; }
D1_GEN=$(flag_value --gen-len "${D1[@]}")
PF_PROMPT=$(flag_value --prompt-len "${PF[@]}")

declare -A M
for shape in dense moe; do
  for d in q4_0 q8_0 f16; do M[$shape-$d]=$(gen "$shape" "$d" gguf --tokenizer bytes); done
  M[$shape-int4]=$(gen "$shape" int4 hf)
  M[$shape-fp8]=$(gen "$shape" fp8 hf)
done

# One row SHAPE_KIND (e.g. dense_decode1_q4): the peers' configurations (llama.cpp, and
# ik_llama.cpp when IK_LLAMA_BENCH names its llama-bench), then densa's, or the other way round.
row() {
  local dir=$1 first=$2 row=$3
  [[ "$row" =~ $ROWS ]] || return 0
  local shape=${row%%_*} kind=${row#*_}
  if [ "$first" = llama ]; then "row_$kind" "$dir" llama "$shape" "$row"; "row_$kind" "$dir" densa "$shape" "$row"
  else "row_$kind" "$dir" densa "$shape" "$row"; "row_$kind" "$dir" llama "$shape" "$row"; fi
}

# Rows: row_KIND DIR ENGINE SHAPE NAME runs that engine's configurations of the row.
row_decode1_q4() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q4_0]}" f16 "${D1[@]}"
       ikllama "$1" "$4" "${M[$3-q4_0]}" tg "$D1_GEN"
  else densa "$1" "$4" int4 "${M[$3-int4]}" "${D1[@]}"
       densa "$1" "$4" int4-headint4 "${M[$3-int4]}" "${D1[@]}" --lm-head-dtype int4-g32
       densa "$1" "$4" q4_0 "${M[$3-q4_0]}" "${D1[@]}"; fi
}
row_decode1_q8() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q8_0]}" f16 "${D1[@]}"
       ikllama "$1" "$4" "${M[$3-q8_0]}" tg "$D1_GEN"
  else densa "$1" "$4" q8_0 "${M[$3-q8_0]}" "${D1[@]}"; fi
}
row_prefill_q8() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q8_0]}" f16 "${PF[@]}"
       ikllama "$1" "$4" "${M[$3-q8_0]}" pp "$PF_PROMPT"
  else densa "$1" "$4" fp8 "${M[$3-fp8]}" "${PF[@]}"
       densa "$1" "$4" q8_0 "${M[$3-q8_0]}" "${PF[@]}"; fi
}
row_prefill_q4() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q4_0]}" f16 "${PF[@]}"
       ikllama "$1" "$4" "${M[$3-q4_0]}" pp "$PF_PROMPT"
  else densa "$1" "$4" q4_0 "${M[$3-q4_0]}" "${PF[@]}"
       densa "$1" "$4" int4 "${M[$3-int4]}" "${PF[@]}"; fi
}
row_prefill_f16() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-f16]}" f16 "${PF[@]}"
       ikllama "$1" "$4" "${M[$3-f16]}" pp "$PF_PROMPT"
  else densa "$1" "$4" f16 "${M[$3-f16]}" "${PF[@]}"; fi
}
row_agg64_q8() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q8_0]}" f16 "${AGG[@]}"
  else densa "$1" "$4" q8_0-fp8kv "${M[$3-q8_0]}" "${AGG[@]}" --kv-dtype fp8
       densa "$1" "$4" q8_0-bf16kv "${M[$3-q8_0]}" "${AGG[@]}" --kv-dtype bf16; fi
}
row_ctx4k_q8() {
  if [ "$2" = llama ]; then llama "$1" "$4" "${M[$3-q8_0]}" f16 "${CTX[@]}"
       llama "$1" "$4" "${M[$3-q8_0]}" q8_0 "${CTX[@]}"
  else densa "$1" "$4" q8_0-fp8kv "${M[$3-q8_0]}" "${CTX[@]}" --kv-dtype fp8
       densa "$1" "$4" q8_0-bf16kv "${M[$3-q8_0]}" "${CTX[@]}" --kv-dtype bf16; fi
}

ALL_ROWS=(dense_decode1_q4 dense_decode1_q8 moe_decode1_q4 moe_decode1_q8 dense_prefill_q8 dense_prefill_q4
          dense_prefill_f16 moe_prefill_q8 moe_prefill_q4 moe_prefill_f16 moe_agg64_q8 moe_ctx4k_q8)
membw before
for r in $(seq 1 "$ROUNDS"); do
  dir=$OUT/round-$r
  mkdir -p "$dir"
  first=llama
  [ $((r % 2)) = 0 ] && first=densa
  log "round $r of $ROUNDS ($first first)"
  for name in "${ALL_ROWS[@]}"; do row "$dir" "$first" "$name"; done
done
membw after
python3 "$HERE/summarize.py" "$OUT" | tee "$OUT/summary.md"
