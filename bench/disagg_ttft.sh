#!/usr/bin/env bash
# TTFT added by disaggregation at low load (docs/performance/disaggregation.md): one colocated `densa serve`, and `densa router` in front of a prefill and a
# decode worker (KV over UCX), same model and threads; plus the router in front of the
# colocated server (the router hop alone). `densa bench serve` at concurrency 1 against each
# path in turn, ROUNDS times, so drift of the shared machine hits every path alike. Prints
# p50 / p90 TTFT per path over the pooled requests, the per-round p50s, and the paired
# differences. Builds nothing.
#
# Usage: bench/disagg_ttft.sh DENSA OUT_DIR [--rounds N] [--prompts N] [--quick]
#   MODEL (default: the MoE fixture's f16 GGUF), UCX_TLS (default tcp), KV_DTYPE (default
#   bf16: colocated and prefill), DECODE_KV_DTYPE (default KV_DTYPE; fp8 = the prefill converts
#   its pages on the way out), THREADS (default 1 per server), PORT (first of 5, default 18310).
# Writes OUT_DIR/<path>-<round>/result.json, OUT_DIR/load.txt, OUT_DIR/ttft.md, server logs, and
# OUT_DIR/{decode,prefill}_metrics.txt (KV transfer bytes and failures, UCX worker pool counts).
set -euo pipefail

DENSA=$1
OUT=$2
shift 2
ROUNDS=5
PROMPTS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift ;;
    --prompts) PROMPTS=$2; shift ;;
    --quick) ROUNDS=2; PROMPTS=5 ;;
    *) echo "usage: $0 DENSA OUT_DIR [--rounds N] [--prompts N] [--quick]" >&2; exit 2 ;;
  esac
  shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${MODEL:-$ROOT/../shared/models/tinystories-mixtral-3.6m/gguf/tinystories-mixtral-3.6m-f16.gguf}
export UCX_TLS=${UCX_TLS:-tcp}
KV_DTYPE=${KV_DTYPE:-bf16}
DECODE_KV_DTYPE=${DECODE_KV_DTYPE:-$KV_DTYPE}
THREADS=${THREADS:-1}
PORT=${PORT:-18310}
COLOCATED=$PORT PREFILL=$((PORT + 1)) DECODE=$((PORT + 2)) ROUTER=$((PORT + 3)) ROUTER_COLO=$((PORT + 4))
mkdir -p "$OUT"
: > "$OUT/load.txt"
log() { echo "== disagg_ttft: $*" >&2; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
declare -A pid_of
serve() {  # PORT LOG ARGS...
  local port=$1 name=$2
  shift 2
  "$DENSA" "$@" --port "$port" > "$OUT/$name.log" 2>&1 &
  pids+=($!)
  pid_of[$port]=$!
}
# ready PORT NAME: waits for GET /health; a server that exits or never answers ends the run.
ready() {
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "${pid_of[$1]}" 2>/dev/null || break
    sleep 0.2
  done
  echo "disagg_ttft: $2 (port $1) did not come up:" >&2
  tail -5 "$OUT/$2.log" >&2
  exit 1
}
common=(-m "$MODEL" --served-model-name tiny-moe --threads "$THREADS")
serve "$COLOCATED" colocated serve "${common[@]}" --kv-dtype "$KV_DTYPE"
serve "$PREFILL" prefill serve "${common[@]}" --kv-dtype "$KV_DTYPE" --role prefill
serve "$DECODE" decode serve "${common[@]}" --kv-dtype "$DECODE_KV_DTYPE" --role decode
ready "$COLOCATED" colocated
ready "$PREFILL" prefill
ready "$DECODE" decode
serve "$ROUTER" router router --prefill "http://127.0.0.1:$PREFILL" --decode "http://127.0.0.1:$DECODE"
serve "$ROUTER_COLO" router-colocated router --prefill "http://127.0.0.1:$COLOCATED" --decode "http://127.0.0.1:$COLOCATED"
ready "$ROUTER" router
ready "$ROUTER_COLO" router-colocated

declare -A url=([colocated]=$COLOCATED [router-colocated]=$ROUTER_COLO [disaggregated]=$ROUTER)
paths=(colocated disaggregated router-colocated)
# Every (round, path) gets prompts of its own: router-colocated fronts the colocated server, and
# with the same prompts as the colocated path just sent, its radix prefix cache held them and
# router-colocated measured a decode step instead of a prefill.
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!paths[@]}"; do
    p=${paths[$i]}
    log "round $r: $p"
    echo "$(date -u +%H:%M:%SZ) round $r $p: $(uptime | sed 's/.*load average: /load average /')" >> "$OUT/load.txt"
    "$DENSA" bench serve --base-url "http://127.0.0.1:${url[$p]}" --model tiny-moe --input-len 128 --output-len 32 \
      --num-prompts "$PROMPTS" --concurrency 1 --warmup 2 --seed "$((r * 10 + i))" --tokenizer-free --no-progress \
      --out-dir "$OUT/$p-$r" > "$OUT/$p-$r.txt" 2>&1
  done
done
# Both workers' KV transfer counts (the wire bytes of every transfer) and UCX worker pool counts.
curl -sf "http://127.0.0.1:$DECODE/metrics" 2>/dev/null | grep -E '^densa_(kv_transfer|ucx_workers)' > "$OUT/decode_metrics.txt" || true
curl -sf "http://127.0.0.1:$PREFILL/metrics" 2>/dev/null | grep -E '^densa_(kv_transfer|ucx_workers)' > "$OUT/prefill_metrics.txt" || true

python3 - "$OUT" "$ROUNDS" "${paths[@]}" <<'EOF' | tee "$OUT/ttft.md"
import json, sys, statistics
out, rounds, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def pct(v, p):
    v = sorted(v)
    pos = p * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)

samples, p50s = {}, {}
for p in paths:
    samples[p], p50s[p] = [], []
    for r in range(1, rounds + 1):
        level = json.load(open(f"{out}/{p}-{r}/result.json"))["levels"][0]
        t = level["samples"]["ttft_ms"]
        samples[p] += t
        p50s[p].append(pct(t, 0.5))
print("| path (concurrency 1) | requests | TTFT p50 (ms) | TTFT p90 (ms) | per-round p50 (ms) |")
print("|---|---|---|---|---|")
for p in paths:
    s = samples[p]
    print(f"| {p} | {len(s)} | {pct(s, 0.5):.1f} | {pct(s, 0.9):.1f} | " + " / ".join(f"{x:.1f}" for x in p50s[p]) + " |")
print()
base = "colocated"
for p in paths:
    if p == base:
        continue
    d50 = pct(samples[p], 0.5) - pct(samples[base], 0.5)
    d90 = pct(samples[p], 0.9) - pct(samples[base], 0.9)
    paired = [a - b for a, b in zip(p50s[p], p50s[base])]
    print(f"{p} - {base}: p50 {d50:+.1f} ms, p90 {d90:+.1f} ms; per-round p50 differences "
          + " / ".join(f"{x:+.1f}" for x in paired) + f" (median {statistics.median(paired):+.1f} ms)")
EOF
log "done: $OUT"
