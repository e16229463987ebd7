#!/usr/bin/env bash
# densa against llama.cpp on the GGUF quants people download (issue #35): llama.cpp's own
# quantizer writes Q4_K_M, Q6_K, IQ4_XS and MXFP4_MOE files from densa's F16 preset checkpoints,
# and both engines read the same files, in turn, as bench/llamacpp/compare.sh does.
#
# Usage: bench/llamacpp/kquants.sh DENSA OUT_DIR [ROUNDS] [--rows REGEX] [--quick]
#   MODEL_DIR (default /tmp/densa-perf-models), THREADS (default 2) as in compare.sh.
#   Rows SHAPE_KIND_FORMAT: SHAPE dense | moe (the presets) | a3b (the Qwen3-30B-A3B layer shape:
#   hidden 2048, 32 heads of 128, 4 KV heads, 128 experts top-8 of width 768, vocab 151,936,
#   with A3B_LAYERS layers, default 12 of the real 48, so that it fits this machine's memory in
#   every format; per layer and token it is the real model's work); SHAPES (default "dense moe")
#   picks them, FORMATS (default "q4km q6k iq4xs mxfp4") the formats. KIND decode1 (batch-1
#   decode), prefill (512 tokens), agg64 (64 parallel decodes; not for a3b); FORMAT q4km | q6k |
#   iq4xs | mxfp4 (MoE shapes only: llama.cpp's MXFP4_MOE puts only the expert stacks in MXFP4,
#   the rest in Q8_0).
#   densa runs each file in the configurations CONFIGS names (default "packed f32"): packed (the
#   default: affine rows, 4-bit codes for the 4-bit formats, W8A8 kernels, in 16-row tiles where
#   the CPU has AVX-512 VNNI); rows (--int8-layout rows: the same codes row-major, on the
#   per-lane VNNI kernel only); f32 (--ggml-blocks f32: the same values as fp32, what densa did
#   before affine rows; only in the decode1 and prefill rows, and not for a3b, whose fp32 form
#   is 4 bytes per weight).
# Writes OUT_DIR/round-N/<row>.<engine-config>.json and OUT_DIR/summary.md (summarize.py).
set -euo pipefail

# shellcheck source=bench/llamacpp/engines.sh
. "$(dirname "$0")/engines.sh"
bench_args "$@"
MD=${MODEL_DIR:-/tmp/densa-perf-models}
BINS=$HERE/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
mkdir -p "$MD"
[ -d "$BINS" ] || { echo "run $HERE/install.sh first" >&2; exit 2; }
log() { echo "== kquants: $*" >&2; }

# shellcheck source=bench/perf_common.sh
. "$HERE/../perf_common.sh"
perf_sizes "$QUICK"

SHAPES=${SHAPES:-dense moe}
CONFIGS=${CONFIGS:-packed f32}
FORMATS=${FORMATS:-q4km q6k iq4xs mxfp4}
A3B_LAYERS=${A3B_LAYERS:-12}
declare -A M
declare -A FTYPE=([q4km]=Q4_K_M [q6k]=Q6_K [iq4xs]=IQ4_XS [mxfp4]=MXFP4_MOE)
for shape in $SHAPES; do
  extra=()
  if [ "$shape" = a3b ]; then
    extra=(--arch qwen3_moe --hidden 2048 --layers "$A3B_LAYERS" --heads 32 --kv-heads 4 --head-dim 128
           --moe-ffn 768 --ffn 768 --experts 128 --top-k 8 --vocab 151936)
    shape=a3b$A3B_LAYERS
  fi
  f16=$(perf_gen "$DENSA" "$MD" "$QUICK" "$shape" f16 gguf --tokenizer bytes "${extra[@]}")
  for fmt in $FORMATS; do
    [ "$fmt" = mxfp4 ] && [ "$shape" = dense ] && continue
    out=${f16%-f16.gguf}-$fmt.gguf
    if [ ! -e "$out" ]; then
      log "llama.cpp quantize $shape ${FTYPE[$fmt]} -> $out"
      /usr/bin/python3 "$HERE/quantize_gguf.py" "$BINS" "$f16" "$out.tmp" "${FTYPE[$fmt]}" >&2
      mv "$out.tmp" "$out"
    fi
    M[$shape-$fmt]=$out
  done
done

args_of() {
  case "$1" in
    decode1) echo "${D1[@]}" ;;
    prefill) echo "${PF[@]}" ;;
    agg64) echo "${AGG[@]}" ;;
  esac
}

run_row() {
  local dir=$1 first=$2 shape=$3 kind=$4 fmt=$5
  local row=${shape}_${kind}_$fmt model=${M[$shape-$fmt]:-}
  [ -n "$model" ] || return 0
  [[ "$row" =~ $ROWS ]] || return 0
  read -r -a a <<< "$(args_of "$kind")"
  # 64 parallel decodes of the f32 form take minutes per run: no f32 there.
  local configs=()
  for c in $CONFIGS; do
    [[ "$c" = f32 && ( "$kind" = agg64 || "$shape" == a3b* ) ]] || configs+=("$c")
  done
  run_densa() { for c in "${configs[@]}"; do
    case "$c" in
      f32) densa "$dir" "$row" "$c" "$model" "${a[@]}" --ggml-blocks f32 ;;
      rows) densa "$dir" "$row" "$c" "$model" "${a[@]}" --int8-layout rows ;;
      *) densa "$dir" "$row" "$c" "$model" "${a[@]}" ;;
    esac; done; }
  if [ "$first" = llama ]; then llama "$dir" "$row" "$model" f16 "${a[@]}"; run_densa
  else run_densa; llama "$dir" "$row" "$model" f16 "${a[@]}"; fi
}

for r in $(seq 1 "$ROUNDS"); do
  dir=$OUT/round-$r
  mkdir -p "$dir"
  first=llama
  [ $((r % 2)) = 0 ] && first=densa
  log "round $r of $ROUNDS ($first first)"
  for shape in $SHAPES; do
    [ "$shape" = a3b ] && shape=a3b$A3B_LAYERS
    for kind in decode1 prefill agg64; do
      [[ "$shape" == a3b* && "$kind" = agg64 ]] && continue
      for fmt in $FORMATS; do run_row "$dir" "$first" "$shape" "$kind" "$fmt"; done
    done
  done
done
python3 "$HERE/summarize.py" "$OUT" | tee "$OUT/summary.md"
