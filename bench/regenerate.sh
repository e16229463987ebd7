#!/usr/bin/env bash
# Regenerates the measurements behind docs/performance/ on the machine at hand, into OUT
# (--out DIR, default bench/results/):
#   1. kernel microbenchmarks: every bench/*_bench.cpp built with Google Benchmark
#      (-> kernels/<name>.json + .txt), and the other bench programs (kv_accuracy_bench, ...)
#      run on the fixtures (-> kernels/<name>.txt);
#   2. capacity: `densa capacity` for the fixture, weights x KV (-> capacity/capacity.txt);
#   3. accuracy: `densa eval` weights x KV against the BF16 baseline (-> accuracy/accuracy.{md,json});
#   4. serving: `densa serve` on the MoE fixture + `densa bench serve` over concurrency
#      1,4,16,64 (-> serving/*.svg, result.json, summary.md);
#   5. perf: `densa gen-model` shapes of issue #10 + `densa bench offline` rows, membw beside
#      them (bench/perf_offline.sh -> perf/*.json, perf/perf.md, perf/load.txt, perf/membw.txt);
#   6. kvtransfer: kv_transfer_bench (densa's KV data plane) beside ucx_perftest on tcp and sm
#      (bench/kv_transfer.sh -> disaggregation/kv_transfer/raw.tsv, kv_transfer.md, load.txt);
#   7. llamacpp: issue #10's rows on llama.cpp and densa in turn, the same files
#      (bench/llamacpp/compare.sh -> llamacpp/all-rows/: round-N/*.json, summary.md, load.txt,
#      membw.txt). Needs node and `npm install` in bench/llamacpp (node-llama-cpp's prebuilt
#      llama.cpp from the npm registry); skipped with a note when that is missing.
# Usage: bench/regenerate.sh [--quick] [--out DIR] [--skip kernels,capacity,accuracy,serving,perf,kvtransfer,llamacpp]
#   BUILD_DIR (default build-bench), JOBS (default 2), DENSA_MODELS_DIR, DENSA_DATA_DIR,
#   MODEL_DIR (generated perf checkpoints, default /tmp/densa-perf-models).
# --quick: short kernel runs, 3 integrity rounds + 5 interleaved runs, 8 eval windows,
# 16 prompts per serving level, a small perf shape (a smoke run of every step, a few minutes).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
JOBS=${JOBS:-2}
# The fixtures, found as CMakeLists.txt finds them: DENSA_SHARED_DIR, ../shared, /work/shared.
SHARED=${DENSA_SHARED_DIR:-$ROOT/../shared}
[ -d "$SHARED/models" ] || [ ! -d /work/shared/models ] || SHARED=/work/shared
MODELS=${DENSA_MODELS_DIR:-$SHARED/models}
DATA=${DENSA_DATA_DIR:-$SHARED/data}
IMG=$ROOT/bench/results
MOE=$MODELS/tinystories-mixtral-3.6m
QUICK=0
SKIP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --skip) SKIP="$2"; shift ;;
    --out) IMG=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
    *) echo "usage: $0 [--quick] [--out DIR] [--skip kernels,capacity,accuracy,serving,perf,kvtransfer,llamacpp]" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ ",$SKIP," != *",$1,"* ]]; }
log() { echo "== regenerate: $*" >&2; }

# ---- build ----
BENCHES=$(cd "$ROOT/bench" && ls ./*_bench.cpp 2>/dev/null | sed 's|^\./||; s|\.cpp$||' || true)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDENSA_BUILD_TESTS=OFF -DDENSA_BUILD_BENCH=ON >/dev/null
# shellcheck disable=SC2086
ninja -C "$BUILD" -j"$JOBS" densa $BENCHES
DENSA=$BUILD/densa
mkdir -p "$IMG"/{kernels,capacity,accuracy,serving,disaggregation,llamacpp}
{
  echo "machine: $(uname -srm), $(nproc) cores"
  grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$IMG/machine.txt"

# ---- 1. kernels and other bench programs ----
if want kernels; then
  for b in $BENCHES; do
    exe=$BUILD/$b
    [ -x "$exe" ] || { log "skip $b (not built)"; continue; }
    [ "$b" = kv_transfer_bench ] && continue  # step 6, beside ucx_perftest
    if grep -q 'benchmark/benchmark.h' "$ROOT/bench/$b.cpp"; then
      log "$b (Google Benchmark)"
      extra=()
      # quick: one shape per family on one thread (setup of the >= 512 MB operands dominates)
      [ "$QUICK" = 1 ] && extra=(--benchmark_min_time=0.05 '--benchmark_filter=(4096x4096|ctx:1024|1GiB).*threads:1/')
      "$exe" --benchmark_counters_tabular=true --benchmark_out="$IMG/kernels/$b.json" --benchmark_out_format=json \
        "${extra[@]}" | tee "$IMG/kernels/$b.txt"
    elif [ "$b" = integrity_overhead_bench ]; then
      log "$b"
      rounds=80 interleave=200
      [ "$QUICK" = 1 ] && rounds=3 interleave=5
      "$exe" --model "$MOE/gguf/tinystories-mixtral-3.6m-f16.gguf" --rounds "$rounds" --interleave-runs "$interleave" \
        | tee "$IMG/kernels/$b.txt"
    else
      log "$b"
      "$exe" "$MODELS" "$DATA" | tee "$IMG/kernels/$b.txt"
    fi
  done
fi

# ---- 2. capacity ----
if want capacity; then
  log "capacity"
  : > "$IMG/capacity/capacity.txt"
  for w in bf16 fp8 int4; do
    for kv in bf16 fp8; do
      echo "### weights $w, KV $kv" >> "$IMG/capacity/capacity.txt"
      "$DENSA" capacity -m "$MOE/hf" --memory 1GiB --weight-dtype "$w" --kv-dtype "$kv" >> "$IMG/capacity/capacity.txt" 2>&1 ||
        echo "(failed)" >> "$IMG/capacity/capacity.txt"
    done
  done
  cat "$IMG/capacity/capacity.txt"
fi

# ---- 3. accuracy ----
if want accuracy; then
  log "accuracy (densa eval)"
  windows=0
  [ "$QUICK" = 1 ] && windows=8
  "$DENSA" eval -m "$MOE/hf" --ids "$MOE/golden/valid.ids.u16.bin" --weights bf16,fp8,int4,int4-g32 \
    --kv bf16,fp8,fp8-dynamic --baseline bf16+x-f32/bf16 --max-windows "$windows" \
    --json "$IMG/accuracy/accuracy.json" --markdown "$IMG/accuracy/accuracy.md"
fi

# ---- 4. serving ----
if want serving; then
  log "serving (densa serve + densa bench serve)"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 18080)
  "$DENSA" serve -m "$MOE/gguf/tinystories-mixtral-3.6m-f16.gguf" --port "$port" --served-model-name tiny-moe \
    > "$IMG/serving/serve.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$IMG/serving/serve.log" >&2; exit 1; }
    sleep 0.2
  done
  prompts=64
  [ "$QUICK" = 1 ] && prompts=16
  "$DENSA" bench serve --base-url "http://127.0.0.1:$port" --model tiny-moe --dataset random \
    --input-len 128 --output-len 64 --num-prompts "$prompts" --concurrency 1,4,16,64 --seed 0 \
    --tokenizer "$MOE/hf" --slo-ttft-ms 1000 --slo-tpot-ms 100 --out-dir "$IMG/serving"
  kill "$server"
  wait "$server" 2>/dev/null || true
  trap - EXIT
fi
# ---- 5. perf (issue #10 shapes, random weights) ----
if want perf; then
  log "perf (densa gen-model + densa bench offline)"
  extra=()
  [ "$QUICK" = 1 ] && extra=(--quick)
  rm -f "$IMG/perf/"*.json
  "$ROOT/bench/perf_offline.sh" "$DENSA" "$IMG/perf" --membw "$BUILD/membw_bench" "${extra[@]}"
fi
# ---- 6. KV transfer: densa's data plane vs ucx_perftest ----
if want kvtransfer; then
  log "kvtransfer (kv_transfer_bench + ucx_perftest)"
  extra=()
  [ "$QUICK" = 1 ] && extra=(--quick)
  BUILD_DIR=$BUILD "$ROOT/bench/kv_transfer.sh" "$IMG/disaggregation/kv_transfer" "${extra[@]}"
fi
# ---- 7. llama.cpp on the same machine and files ----
if want llamacpp; then
  if [ -d "$ROOT/bench/llamacpp/node_modules/node-llama-cpp" ]; then
    log "llamacpp (bench/llamacpp/compare.sh)"
    extra=(3)
    [ "$QUICK" = 1 ] && extra=(1 --quick)
    MEMBW=$BUILD/membw_bench "$ROOT/bench/llamacpp/compare.sh" "$DENSA" "$IMG/llamacpp/all-rows" "${extra[@]}"
  else
    log "skip llamacpp: run bench/llamacpp/install.sh first (needs the npm registry)"
  fi
fi
log "done: $IMG"
