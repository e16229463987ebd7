#!/usr/bin/env bash
# Smoke run of the commands docs/performance/ prints, in short forms (small shapes, one round,
# few windows), so a renamed flag or a broken script shows up before a reader finds it. It
# checks that each command runs and prints what the page reads from it, not the numbers
# (those need the full runs on a quiet machine), except the capacity rows, which are exact.
#
# Usage: bench/docs_smoke.sh [--only kernels,llamacpp,decode,batching,kv,disagg,integrity,accuracy,capacity,parallel,serving,regenerate]
#   BUILD_DIR (default build): a build configured with benchmarks on (scripts/test.sh's is);
#   the script builds the targets it needs there. OUT (default /tmp/densa-docs-smoke).
#   DENSA_MODELS_DIR / DENSA_DATA_DIR: the fixtures (default DENSA_SHARED_DIR or ../shared).
# Steps with a prerequisite that is missing (node-llama-cpp for "llamacpp", ucx_perftest for
# "disagg") fail and say so; --only leaves steps out explicitly. "regenerate" runs
# bench/regenerate.sh --quick in its own build tree (BUILD_DIR/../build-smoke-regen), which
# is a second full build, so it runs only when named in --only.
# Runtime on an idle 2-core VM: about 35 s for the default steps into an empty OUT (llamacpp
# 15 s of it), plus building the benchmark targets the first time; minutes under load.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${BUILD_DIR:-$ROOT/build}")
OUT=${OUT:-/tmp/densa-docs-smoke}
# The fixtures, found as CMakeLists.txt finds them: DENSA_SHARED_DIR, ../shared, /work/shared.
SHARED=${DENSA_SHARED_DIR:-$ROOT/../shared}
[ -d "$SHARED/models" ] || [ ! -d /work/shared/models ] || SHARED=/work/shared
MODELS=${DENSA_MODELS_DIR:-$SHARED/models}
DATA=${DENSA_DATA_DIR:-$SHARED/data}
ONLY=kernels,llamacpp,decode,batching,kv,disagg,integrity,accuracy,capacity,parallel,serving
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=$2; shift ;;
    *) echo "usage: $0 [--only STEP,...]" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
log() { echo "== docs-smoke: $*" >&2; }
fail() { echo "docs-smoke: FAILED: $*" >&2; failures+=("$*"); }
failures=()
mkdir -p "$OUT"
DENSA=$BUILD/densa
MOE=$MODELS/tinystories-mixtral-3.6m
LLAMA=$MODELS/tinystories-llama-1m
MD=$OUT/models
mkdir -p "$MD"
start=$(date +%s)

targets=(densa)
want kernels && targets+=(gemv_bench membw_bench mla_absorb_bench dsa_decode_bench int8_peak_bench attention_bench)
want parallel && targets+=(allreduce_bench)
want kv && targets+=(kv_accuracy_bench)
want disagg && targets+=(kv_transfer_bench)
want integrity && targets+=(integrity_overhead_bench)
log "building ${targets[*]} in $BUILD"
nice ninja -C "$BUILD" "${targets[@]}" >&2

# run NAME EXPECT CMD...: runs CMD with its output in $OUT/NAME.log; fails unless the output
# matches the extended regex EXPECT.
run() {
  local name=$1 expect=$2
  shift 2
  log "$name: $*"
  local t0=$SECONDS
  if ! "$@" > "$OUT/$name.log" 2>&1; then fail "$name (exit status; log $OUT/$name.log)"; return 0; fi
  grep -Eq "$expect" "$OUT/$name.log" || fail "$name (no line matching '$expect'; log $OUT/$name.log)"
  log "$name: $((SECONDS - t0)) s"
}

# A small random MoE checkpoint per format for the bench offline commands.
gen() {  # gen NAME ARGS... -> $MD/NAME
  [ -e "$MD/$1" ] || "$DENSA" gen-model --arch mixtral --hidden 256 --layers 2 --heads 4 --kv-heads 2 --ffn 384 \
    --experts 8 --top-k 2 --vocab 4096 --max-context 8192 "${@:2}" "$MD/$1" >/dev/null
  echo "$MD/$1"
}
BOFF='^(prefill|decode):'

if want kernels; then
  run membw '^membw/' "$BUILD/membw_bench" --benchmark_min_time=0.05 --benchmark_filter='read_(1GiB|192MiB)'
  run gemv_bf16 'gemm/n:512/bf16' "$BUILD/gemv_bench" --benchmark_filter='^gemm/n:512/bf16' --benchmark_min_time=0.01
  run gemv_int8 'int8_g32_tiles' "$BUILD/gemv_bench" --benchmark_filter='^gemv_hot/int8_g32' --benchmark_min_time=0.01
  run gemv_fp8 'fp8_b128' env DENSA_AMX=0 "$BUILD/gemv_bench" --benchmark_filter='^gemv_hot/fp8' --benchmark_min_time=0.01
  run gemv_affine 'affine/avx2/gemv/4096x4096/q4_k' "$BUILD/gemv_bench" \
    --benchmark_filter='^affine/avx2/gemv/.*/q4_k/threads:1' --benchmark_min_time=0.01
  run mla_absorb 'deepseek-v3' "$BUILD/mla_absorb_bench" --rounds 1
  run dsa_decode '^ +4096 ' "$BUILD/dsa_decode_bench" --rounds 1 --max-context 4096 --threads 2
  run dsa_decode_avx2 '^ +4096 ' env DENSA_ISA=avx2 "$BUILD/dsa_decode_bench" --rounds 1 --max-context 4096
  run vnni_group '^vnni_group/tiles:2' "$BUILD/int8_peak_bench" --benchmark_filter='vnni_group' --benchmark_min_time=0.01
  run prefill_attention 'BM_PrefillAttention/ctx:512/kv:0/threads:1/shape:1.*tok_per_s' "$BUILD/attention_bench" \
    --benchmark_filter='BM_PrefillAttention/ctx:512/kv:0/threads:1/shape:1' --benchmark_min_time=0.01
  run format_roofline '^\| Q4_0 \(GGUF\) \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \| (amx-int8|vnni|avx2) \(' \
    env MODEL_DIR="$MD" "$ROOT/bench/format_roofline.sh" "$DENSA" "$OUT/format_roofline" 1 --quick
fi
if want llamacpp; then
  if [ -d "$ROOT/bench/llamacpp/node_modules/node-llama-cpp" ]; then
    run llamacpp_compare 'densa / llama.cpp' env MODEL_DIR="$MD" "$ROOT/bench/llamacpp/compare.sh" "$DENSA" "$OUT/llamacpp" 1 --quick
    run llamacpp_kquants 'densa, packed' env MODEL_DIR="$MD" "$ROOT/bench/llamacpp/kquants.sh" "$DENSA" "$OUT/kquants" 1 \
      --quick --rows 'moe_decode1'
    # ik_llama.cpp is built outside the repository, so CI has none: its llama-bench JSON (the
    # fields ik_llama.cpp and llama.cpp write) goes through the converter compare.sh uses.
    echo '[{"build_commit":"x","model_type":"m","n_threads":2,"n_prompt":512,"n_gen":0,"avg_ts":500.0,"samples_ts":[490.0,510.0]}]' \
      > "$OUT/ikllama_sample.json"
    run ikllama_json '"prefill_tok_s": 500' sh -c "python3 '$ROOT/bench/llamacpp/ikllama_json.py' pp < '$OUT/ikllama_sample.json'"
    # peers.sh (issue #37's rows) needs ik_llama.cpp too; its summary of paired ratios runs here.
    printf 'round 1 r ik 400\nround 1 r llama 200\nround 1 r densa 600\nround 2 r ik 500\nround 2 r llama 250\nround 2 r densa 700\n' \
      > "$OUT/peers_raw.txt"
    run peers_summary '\| r \| densa \| 600.0, 700.0 \| 1.45x \[1.40, 1.50\] \| 2.90x \[2.80, 3.00\]' \
      python3 "$ROOT/bench/llamacpp/peers_summary.py" "$OUT/peers_raw.txt"
    # Its compute roofline: 2 x 2 layers x (q, o 128x128, k, v 64x128, FFN 3 x 128x256) = 0.59 MOP
    # a token, at 100,000 tok/s 59 GOPS, 59% of a 100-GOPS AMX peak.
    printf 'layers:         2\nhidden:         128\nheads:          4 (kv heads 2, head_dim 32)\nffn:            256\n' \
      > "$OUT/info-dense.txt"
    echo '{"benchmarks":[{"name":"int8_peak/vnni/real_time/threads:2","GOPS":50.0},{"name":"int8_peak/amx/real_time/threads:2","GOPS":100.0}]}' \
      > "$OUT/int8_peak.json"
    echo "round 1 dense_prefill_q4_0 densa 100000" > "$OUT/roofline_raw.txt"
    run roofline '\| dense_prefill_q4_0 \| densa \| 100000.0 \| 0.001 \| 59 \| amx \(100 GOPS\) \| 59.0% \|' \
      python3 "$ROOT/bench/llamacpp/roofline.py" "$OUT/roofline_raw.txt" "$OUT" "$OUT/int8_peak.json"
    # On a CPU without AVX-512 the VNNI peak is skipped and every engine is held to AVX2's.
    echo '{"benchmarks":[{"name":"int8_peak/vnni/real_time/threads:2","error_occurred":true,"error_message":"no AVX-512 VNNI"},{"name":"int8_peak/avx2/real_time/threads:2","GOPS":200.0}]}' \
      > "$OUT/int8_peak_avx2.json"
    run roofline_avx2 '\| dense_prefill_q4_0 \| densa \| 100000.0 \| 0.001 \| 59 \| avx2 \(200 GOPS\) \| 29.5% \|' \
      python3 "$ROOT/bench/llamacpp/roofline.py" "$OUT/roofline_raw.txt" "$OUT" "$OUT/int8_peak_avx2.json"
  else
    fail "llamacpp: node-llama-cpp is not installed (run bench/llamacpp/install.sh, or leave the step out with --only)"
  fi
fi
if want decode; then
  run perf_offline '\| row' "$ROOT/bench/perf_offline.sh" "$DENSA" "$OUT/perf" --quick
  m=$(gen moe-bf16 --dtype bf16 --format hf)
  run flag_ab_bf16 'round 2 .*decode:' "$ROOT/bench/flag_ab.sh" "$DENSA" "$m" "$OUT/flag_ab_bf16.txt" 2 \
    --bf16-activations auto f32 --batch 1 --prompt-len 64 --gen-len 8 --repeats 1
  m=$(gen moe-q8_0.gguf --dtype q8_0 --format gguf)
  run flag_ab_int8 'round 2 .*decode:' "$ROOT/bench/flag_ab.sh" "$DENSA" "$m" "$OUT/flag_ab_int8.txt" 2 \
    --int8-layout tiles rows --batch 1 --prompt-len 64 --gen-len 8 --repeats 1
  run binary_ab 'round 2 B: .*decode:' "$ROOT/bench/binary_ab.sh" "$DENSA" "$DENSA" "$m" "$OUT/binary_ab.txt" 2 \
    --batch 1 --prompt-len 64 --gen-len 8 --repeats 1
fi
if want batching; then
  m=$(gen moe-fp8 --dtype fp8 --format hf)
  run batch64 "$BOFF" "$DENSA" bench offline -m "$m" --batch 8 --prompt-len 32 --gen-len 8 --repeats 1 --kv-dtype fp8
fi
if want kv; then
  run kv_accuracy 'fp8_e4m3 dynamic' "$BUILD/kv_accuracy_bench" "$MODELS" "$DATA"
  m=$(gen moe-int4 --dtype int4 --group-size 32 --format hf)
  run flag_ab_kv 'round 2 .*decode:' "$ROOT/bench/flag_ab.sh" "$DENSA" "$m" "$OUT/flag_ab_kv.txt" 2 --kv-dtype bf16 fp8 \
    --batch 1 --prompt-len 256 --gen-len 8 --repeats 1 --lm-head-dtype int4-g32
  run flag_ab_page 'round 2 .*decode:' "$ROOT/bench/flag_ab.sh" "$DENSA" "$m" "$OUT/flag_ab_page.txt" 2 --page-size 16 64 \
    --batch 1 --prompt-len 256 --gen-len 8 --repeats 1 --kv-dtype fp8 --lm-head-dtype int4-g32
fi
if want disagg; then
  run disagg_ttft 'disaggregated' env MODEL="$MOE/gguf/tinystories-mixtral-3.6m-f16.gguf" \
    "$ROOT/bench/disagg_ttft.sh" "$DENSA" "$OUT/ttft" --quick
  run kv_transfer 'pooled UCX workers' env UCX_TLS=tcp "$BUILD/kv_transfer_bench" --layout fixture --pages 16 --transfers 2
fi
if want integrity; then
  run integrity 'digest' "$BUILD/integrity_overhead_bench" --model "$MOE/gguf/tinystories-mixtral-3.6m-f16.gguf" \
    --rounds 1 --interleave-runs 1 --threads 2
fi
if want accuracy; then
  run eval_weights 'int4-g32/f32' "$DENSA" eval -m "$LLAMA/hf" --ids "$LLAMA/golden/valid.ids.u16.bin" \
    --weights bf16,fp8,q8_0,q4_0,int4-g32,int4 --kv f32 --baseline bf16+x-f32/f32 -t 2 --max-windows 2
  run eval_half 'native/bf16' "$DENSA" eval -m "$MOE/hf-bf16" --ids "$MOE/golden/valid.ids.u16.bin" \
    --weights native,native+x-f32 --kv bf16 --baseline native+x-f32/bf16 --max-windows 2
  run eval_head 'head' "$DENSA" eval -m "$LLAMA/hf" --ids "$LLAMA/golden/valid.ids.u16.bin" \
    --weights int4-g32+head-fp8,int4-g32+head-q8_0 --kv f32 --baseline int4-g32/f32 -t 2 --max-windows 2
fi
if want capacity; then
  # Exact: the rows docs/performance/capacity.md shows.
  run capacity_kimi '15,461,552|15461552' "$DENSA" capacity --model "$ROOT/tests/data/configs/kimi-k2.json" --memory 1128GB \
    --weight-dtype int4 --kv-dtype fp8 --kv-scales dynamic --context 32768
  run capacity_glm '4,105,216|4105216' "$DENSA" capacity --model "$ROOT/tests/data/configs/glm-4.5.json" --memory 1128GB \
    --weight-dtype fp8 --kv-dtype fp8 --kv-scales static --context 8192
  run capacity_glm5_tp8 '1,568,720|1568720' "$DENSA" capacity --model "$ROOT/tests/data/configs/glm-5.json" --memory 141GB \
    --tp 8 --ep 8 --weight-dtype int4 --kv-dtype fp8 --context 131072
  run capacity_kimi26_tp8 '1,911,616|1911616' "$DENSA" capacity --model "$ROOT/tests/data/configs/kimi-k2.6.json" \
    --memory 141GB --tp 8 --ep 8 --weight-dtype int4 --kv-dtype fp8 --context 131072
fi
if want parallel; then
  # docs/performance/parallel.md: the table's rows (small shape, one round, under mpirun).
  run parallel '^\| ep2 \|' env BUILD="$BUILD" MODELS_DIR="$MD" "$ROOT/bench/parallel.sh" 1 1
  run parallel_gather '^\| tp2-gather \|' env BUILD="$BUILD" MODELS_DIR="$MD" LAYOUTS="tp2 tp2-gather" \
    "$ROOT/bench/parallel.sh" 1 1
  run allreduce ' yes$' mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -n 2 \
    "$BUILD/allreduce_bench" --rounds 1
fi
if want serving; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$DENSA" serve -m "$MOE/gguf/tinystories-mixtral-3.6m-f16.gguf" --port "$port" --threads 2 --routing-stats \
    > "$OUT/serve.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  run bench_serve 'goodput' "$DENSA" bench serve --base-url "http://127.0.0.1:$port" --model tinystories-mixtral-3.6m-f16 \
    --dataset random --input-len 32 --output-len 8 --num-prompts 4 --concurrency 1,4 --seed 0 \
    --tokenizer "$MOE/hf" --slo-ttft-ms 1000 --slo-tpot-ms 100 --out-dir "$OUT/serving" --no-progress
  run bench_serve_breakdown 'server share' "$DENSA" bench serve --base-url "http://127.0.0.1:$port" \
    --model tinystories-mixtral-3.6m-f16 --dataset random --input-len 32 --output-len 8 --num-prompts 4 \
    --concurrency 1 --seed 0 --tokenizer "$MOE/hf" --ignore-eos --extra-body '{"densa_timing": true}' \
    --out-dir "$OUT/breakdown" --no-progress
  kill "$server"; wait "$server" 2>/dev/null || true
  trap - EXIT
fi
if want regenerate; then
  run regenerate 'done' env BUILD_DIR="$BUILD/../build-smoke-regen" "$ROOT/bench/regenerate.sh" --quick \
    --out "$OUT/regenerate" --skip llamacpp
fi

echo "docs-smoke: $(( $(date +%s) - start )) s, ${#failures[@]} failure(s); logs in $OUT"
for f in "${failures[@]}"; do echo "  $f"; done
[ ${#failures[@]} = 0 ]
