#!/usr/bin/env bash
# "KV transfer" (docs/performance/disaggregation.md): for each transport and request
# size, kv_transfer_bench moves real KV pages through densa's data plane (BF16->BF16,
# BF16->FP8 static, FP8->FP8, BF16->FP8 dynamic), then ucx_perftest (UCP tag_bw, a server and a
# client process on loopback) streams messages of the same size over the same UCX_TLS, so the
# two are measured minutes apart on the same load. Builds nothing: BUILD_DIR must hold
# kv_transfer_bench.
#
# Usage: bench/kv_transfer.sh [OUT_DIR] [--quick]
#   BUILD_DIR (default build-bench), TRANSPORTS (default "tcp sm"), UCX_PERFTEST (default
#   ucx_perftest), PORT (default 13441).
# Writes OUT_DIR/raw.tsv (the bench rows + ucx_perftest GB/s), OUT_DIR/kv_transfer.md (the
# tables), OUT_DIR/load.txt (`uptime` before every run), OUT_DIR/stderr.log.
# --quick: fewer transfers and a 32-page large request (a smoke run, well under a minute).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
OUT=$ROOT/bench/results/disaggregation/kv_transfer
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -*) echo "usage: $0 [OUT_DIR] [--quick]" >&2; exit 2 ;;
    *) OUT=$a ;;
  esac
done
BENCH=$BUILD/kv_transfer_bench
PERFTEST=${UCX_PERFTEST:-ucx_perftest}
TRANSPORTS=${TRANSPORTS:-tcp sm}
PORT=${PORT:-13441}
[ -x "$BENCH" ] || { echo "$BENCH not built (ninja -C $BUILD kv_transfer_bench)" >&2; exit 1; }
command -v "$PERFTEST" >/dev/null || { echo "$PERFTEST not found" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/load.txt"
: > "$OUT/stderr.log"
log() { echo "== kv_transfer: $*" >&2; }
load() { echo "$(date -u +%H:%M:%SZ) $1: $(uptime | sed 's/.*load average: /load average /')" >> "$OUT/load.txt"; }

# layout pages transfers (fixture: its whole 256-token context; large: 24 x 4 x 128, 4K tokens)
if [ "$QUICK" = 1 ]; then
  CASES=("fixture 16 5" "large 32 2")
else
  CASES=("fixture 16 20" "large 256 5")
fi

# perftest TLS SIZE ITERS -> GB/s (10^9) of the client's overall bandwidth (ucx_perftest
# reports MB/s as 2^20 bytes).
perftest() {
  local tls=$1 size=$2 iters=$3 server line="" attempt
  for attempt in 1 2 3; do
    UCX_TLS=$tls timeout 120 "$PERFTEST" -p "$PORT" >> "$OUT/stderr.log" 2>&1 &
    server=$!
    for _ in $(seq 1 100); do
      ss -ltn "sport = :$PORT" 2>/dev/null | grep -q LISTEN && break
      sleep 0.05
    done
    sleep 0.3  # a client started the moment the server listens sometimes crashes (ucx_perftest 1.13)
    line=$(UCX_TLS=$tls timeout 120 "$PERFTEST" 127.0.0.1 -p "$PORT" -t tag_bw -s "$size" -n "$iters" -w 20 -f -v \
             2>>"$OUT/stderr.log" | tail -1) || true
    if [[ "$line" == *,*,*,*,*,* ]]; then
      wait "$server" 2>/dev/null || true
      break
    fi
    echo "ucx_perftest UCX_TLS=$tls -s $size: attempt $attempt failed" >> "$OUT/stderr.log"
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    line=""
  done
  # iterations,p50_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
  echo "$line" | awk -F, 'NF >= 6 { printf "%.3f", $6 * 1048576 / 1e9; next } { printf "0" }'
}

raw=$OUT/raw.tsv
first=1
for tls in $TRANSPORTS; do
  for c in "${CASES[@]}"; do
    read -r layout pages transfers <<< "$c"
    log "UCX_TLS=$tls $layout $pages pages"
    load "densa $tls $layout"
    if ! rows=$(UCX_TLS=$tls "$BENCH" --layout "$layout" --pages "$pages" --transfers "$transfers" --tsv \
                2>>"$OUT/stderr.log"); then
      log "kv_transfer_bench failed (UCX_TLS=$tls $layout): see $OUT/stderr.log"
      exit 1
    fi
    if [ "$first" = 1 ]; then
      echo "$(grep -m1 '^tls	' <<< "$rows")	perftest_msg_GBps" > "$raw"
      first=0
    fi
    load "ucx_perftest $tls $layout"
    declare -A pt=()
    while IFS=$'\t' read -r -a f; do
      [ "${#f[@]}" -ge 16 ] || continue
      size=${f[7]}
      if [ -z "${pt[$size]:-}" ]; then
        iters=$(( pages * transfers ))
        [ "$iters" -lt 200 ] && iters=200
        pt[$size]=$(perftest "$tls" "$size" "$iters")
      fi
      echo "$(IFS=$'\t'; echo "${f[*]}")	${pt[$size]}" >> "$raw"
    done < <(grep "^$tls	" <<< "$rows")  # UCX writes its log lines to stdout too
    unset pt
  done
done

# Tables: one per transport x request size.
awk -F'\t' '
  NR == 1 { next }
  {
    key = $1 " " $2 " " $3
    if (key != last) {
      printf "\n**UCX_TLS=%s, %s layout, %s pages** (a transfer of no pages: %.1f ms; fresh memory written at %.2f GB/s)\n\n",
             $1, $2, $3, $5, $4
      print "| convert | bytes/page on the wire (header 48) | wire bytes/token | build ms | verify ms | transfer ms | densa wire GB/s | pages/s | ucx_perftest GB/s, same msg size | densa / perftest |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      last = key
    }
    ratio = ($17 > 0) ? sprintf("%.3f", $15 / $17) : "n/a"
    printf "| %s | %s (%.2f%% header) | %s | %.2f | %.2f | %.1f | %.3f | %s | %s | %s |\n",
           $6, $8, 4800 / $8, $9, $10, $11, $12, $15, $16, $17, ratio
  }' "$raw" | tee "$OUT/kv_transfer.md"
echo >> "$OUT/kv_transfer.md"
sed 's/^/    /' "$OUT/load.txt" >> "$OUT/kv_transfer.md"
log "done: $OUT"
