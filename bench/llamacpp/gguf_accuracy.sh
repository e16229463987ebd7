#!/usr/bin/env bash
# Perplexity and KL against the F16 file, per GGUF quantization type, for the two fixtures:
# llama.cpp's own quantizer (quantize_gguf.py: llama_model_quantize from node-llama-cpp's
# prebuilt libllama) writes each type from the fixture's F16 GGUF, then one `densa eval` per
# fixture scores every file against the F16 file (baseline F16 on the exact fp32-activation
# kernels, F32 KV) on the fixture's validation ids, and llama.cpp scores the same files on the
# same windows against the same F16 file (llamacpp_ppl.mjs with its F16 base: PPL, KL mean and
# p99, same top-1). Writes OUT_DIR/<model>.md and .json (densa eval), OUT_DIR/<model>-<TYPE>.llama.json
# and OUT_DIR/<model>.side-by-side.md (both engines per file, accuracy_table.py).
#
# Usage: bench/llamacpp/gguf_accuracy.sh DENSA OUT_DIR   (bench/llamacpp/install.sh first)
set -euo pipefail
DENSA=$(realpath "$1")
OUT=$(mkdir -p "$2" && realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
BINS=$HERE/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
MODELS=${MODELS:-/work/shared/models}
TYPES=${TYPES:-"Q8_0 Q6_K Q5_K_M Q5_1 Q5_0 Q4_K_M Q4_1 Q4_0 IQ4_NL IQ4_XS Q3_K_M Q2_K MXFP4_MOE"}
for m in tinystories-llama-1m tinystories-mixtral-3.6m; do
  f16=$MODELS/$m/gguf/$m-f16.gguf
  weights=""
  for t in $TYPES; do
    q=$OUT/$m-$t.gguf
    [ -f "$q" ] || /usr/bin/python3 "$HERE/quantize_gguf.py" "$BINS" "$f16" "$q" "$t" > "$OUT/$m-$t.quantize.log" 2>&1
    weights="$weights${weights:+,}file:$q"
  done
  "$DENSA" info -m "$OUT/$m-Q4_K_M.gguf" > "$OUT/$m-Q4_K_M.info.txt"
  "$DENSA" eval -m "$f16" --ids "$MODELS/$m/golden/valid.ids.u16.bin" --ctx 128 --max-windows "${MAX_WINDOWS:-16}" --kv f32 \
    --baseline native+x-f32/f32 --weights "$weights" --markdown "$OUT/$m.md" --json "$OUT/$m.json"
  for t in $TYPES; do
    (cd "$HERE" && node llamacpp_ppl.mjs "$OUT/$m-$t.gguf" "$MODELS/$m/golden/valid.ids.u16.bin" 128 \
       "${MAX_WINDOWS:-16}" "$f16") > "$OUT/$m-$t.llama.json"
  done
  (cd "$HERE" && node llamacpp_ppl.mjs "$f16" "$MODELS/$m/golden/valid.ids.u16.bin" 128 "${MAX_WINDOWS:-16}") \
    > "$OUT/$m-F16.llama.json"
  python3 "$HERE/accuracy_table.py" "$OUT" "$m" "$TYPES" > "$OUT/$m.side-by-side.md"
done
