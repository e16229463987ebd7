#!/usr/bin/env bash
# The prefill compute roofline per weight format (issue #37): densa's prefill of one 512-token
# prompt on the dense-336m preset written in each format densa's gen-model writes, against the
# measured peak of the unit that format's GEMMs run on here, as `densa --version` names it:
#   Q4_0 (GGUF), INT4 g32 (HF), Q8_0 (GGUF): int8 products, AMX-INT8, AVX-512 VNNI or AVX2;
#   FP8 (HF, 128x128 blocks): bf16 products, AMX-BF16 or AVX-512 vdpbf16ps;
#   BF16 (GGUF): AMX-BF16 where the CPU grants it, else fp32 FMAs (fp32 activations).
# The formats run in turn, the order rotating every round; GOPS is the median tok/s times 2 x
# the linear weights a token multiplies (bench/llamacpp/roofline.py's count).
#
# With LLAMA_QUANTIZE naming a llama-quantize binary (llama.cpp's or ik_llama.cpp's, built outside
# the repo), the BF16 file is also quantized with it, every tensor alike (--pure), to the GGUF
# formats gen-model does not write: Q4_K, Q6_K, IQ4_XS and MXFP4, which densa repacks at load
# into affine rows in 16-row tiles (int8 products, the INT8 tiles' units).
#
# Usage: bench/format_roofline.sh DENSA OUT_DIR [ROUNDS] [--quick]
#   MODEL_DIR (default /tmp/densa-perf-models): the files, written once (bench/perf_common.sh).
#   PEAK (default int8_peak_bench beside DENSA). THREADS (default 2). --quick: tiny shapes, a
#   64-token prompt (the smoke run of docs/performance/kernels.md's command).
# Writes OUT_DIR/raw.txt (round, format, tok/s), OUT_DIR/peak.json and prints the table (also
# OUT_DIR/roofline.md).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DENSA=$(realpath "${1:?usage: $0 DENSA OUT_DIR [ROUNDS] [--quick]}")
OUT=${2:?usage: $0 DENSA OUT_DIR [ROUNDS] [--quick]}
ROUNDS=${3:-3}
QUICK=0
[ "${4:-}" = --quick ] && QUICK=1
MD=${MODEL_DIR:-/tmp/densa-perf-models}
THREADS=${THREADS:-2}
PEAK=${PEAK:-$(dirname "$DENSA")/int8_peak_bench}
mkdir -p "$OUT" "$MD"
# shellcheck source=bench/perf_common.sh
. "$HERE/perf_common.sh"

declare -A M
M[q4_0]=$(perf_gen "$DENSA" "$MD" "$QUICK" dense q4_0 gguf)
M[q8_0]=$(perf_gen "$DENSA" "$MD" "$QUICK" dense q8_0 gguf)
M[bf16]=$(perf_gen "$DENSA" "$MD" "$QUICK" dense bf16 gguf)
M[int4]=$(perf_gen "$DENSA" "$MD" "$QUICK" dense int4 hf)
M[fp8]=$(perf_gen "$DENSA" "$MD" "$QUICK" dense fp8 hf)
formats=(q4_0 int4 q8_0 fp8 bf16)
if [ -n "${LLAMA_QUANTIZE:-}" ]; then
  for t in Q4_K Q6_K IQ4_XS MXFP4; do
    f=${M[bf16]%.gguf}-${t,,}.gguf
    if [ ! -s "$f" ]; then
      "$LLAMA_QUANTIZE" --pure "${M[bf16]}" "$f.tmp" "$t" > "$f.log" 2>&1
      mv "$f.tmp" "$f"
    fi
    M[${t,,}]=$f
    formats+=("${t,,}")
  done
fi
PROMPT=512
[ "$QUICK" = 1 ] && PROMPT=64

"$DENSA" --version > "$OUT/version.txt"
"$DENSA" info -m "${M[q4_0]}" > "$OUT/info-dense.txt"
RAW=$OUT/raw.txt
: > "$RAW"
for ((r = 1; r <= ROUNDS; r++)); do
  n=${#formats[@]}
  for ((k = 0; k < n; k++)); do
    f=${formats[$(((k + r - 1) % n))]}
    json=$OUT/round-$r-$f.json
    "$DENSA" bench offline -m "${M[$f]}" --threads "$THREADS" --batch 1 --prompt-len "$PROMPT" --gen-len 2 \
      --repeats 2 --json "$json" > /dev/null
    tok_s=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["prefill_tok_s"])' "$json")
    echo "round $r $f $tok_s" >> "$RAW"
    echo "== format_roofline: round $r $f $tok_s tok/s" >&2
  done
done
min_time=1
[ "$QUICK" = 1 ] && min_time=0.05
"$PEAK" --benchmark_min_time="$min_time" --benchmark_format=json > "$OUT/peak.json"
python3 "$HERE/format_roofline.py" "$RAW" "$OUT/info-dense.txt" "$OUT/peak.json" "$OUT/version.txt" "$THREADS" \
  | tee "$OUT/roofline.md"
