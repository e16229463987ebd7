#!/usr/bin/env bash
# bench/parallel.sh [ROUNDS] [QUICK]: tensor / expert parallel speed and communication share on
# the MoE preset (moe-959m-a336m, Q8_0 GGUF, written once by gen-model into $MODELS_DIR),
# through `densa bench offline`, interleaved rounds of:
#   one   : one process, --threads 2
#   tp2   : mpirun -n 2 ... --tp 2, --threads 1 per rank
#   ep2   : mpirun -n 2 ... --ep 2, --threads 1 per rank
# each at decode (batch 1, 16-token prompt, 64 tokens) and prefill (batch 1, 256-token prompt).
# Prints a Markdown table of medians: tok/s, rank 0's share of wall time inside collectives,
# and rank 0's weight bytes. On one 2-core machine the ranks share the cores that one
# process uses alone, so the table shows what splitting costs (communication, replicated
# work), not what more machines gain. QUICK=1: the small shape, one round.
# Env: BUILD (default build), MODELS_DIR (default build/bench-models), LAYOUTS (default
# "one tp2 ep2"; also tp2-gather / ep2-gather: the same with every all-reduce in the gather
# form, DENSA_ALLREDUCE=gather, for an A/B of the all-reduce algorithms).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
QUICK=${2:-0}
BUILD=${BUILD:-build}
DENSA=$BUILD/densa
MODELS_DIR=${MODELS_DIR:-$BUILD/bench-models}
mkdir -p "$MODELS_DIR"
# shellcheck source=perf_common.sh
. bench/perf_common.sh
MODEL=$(perf_gen "$DENSA" "$MODELS_DIR" "$QUICK" moe q8_0 gguf)
[ "$QUICK" = 1 ] && ROUNDS=1
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -n 2)
DEC=(--batch 1 --prompt-len 16 --gen-len 64 --repeats 1)
PRE=(--batch 1 --prompt-len 256 --gen-len 2 --repeats 1)
[ "$QUICK" = 1 ] && DEC=(--batch 1 --prompt-len 16 --gen-len 8 --repeats 1) && PRE=(--batch 1 --prompt-len 64 --gen-len 2 --repeats 1)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() {  # run NAME ROW ROUND ARGS...
  local name=$1 row=$2 round=$3
  shift 3
  local json=$OUT/$name-$row-$round.json
  case $name in
    one) "$DENSA" bench offline -m "$MODEL" --threads 2 "$@" --json "$json" >/dev/null ;;
    tp2) "${MPI[@]}" "$DENSA" bench offline -m "$MODEL" --threads 1 --tp 2 "$@" --json "$json" >/dev/null ;;
    ep2) "${MPI[@]}" "$DENSA" bench offline -m "$MODEL" --threads 1 --ep 2 "$@" --json "$json" >/dev/null ;;
    tp2-gather) "${MPI[@]}" -x DENSA_ALLREDUCE=gather "$DENSA" bench offline -m "$MODEL" --threads 1 --tp 2 "$@" \
      --json "$json" >/dev/null ;;
    ep2-gather) "${MPI[@]}" -x DENSA_ALLREDUCE=gather "$DENSA" bench offline -m "$MODEL" --threads 1 --ep 2 "$@" \
      --json "$json" >/dev/null ;;
    *) echo "parallel.sh: unknown layout $name" >&2; exit 2 ;;
  esac
}

LAYOUTS=${LAYOUTS:-one tp2 ep2}
for round in $(seq "$ROUNDS"); do
  for name in $LAYOUTS; do
    echo "== round $round: $name" >&2
    run "$name" decode "$round" "${DEC[@]}"
    run "$name" prefill "$round" "${PRE[@]}"
  done
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; model $MODEL; $ROUNDS interleaved rounds, medians"
echo
echo "| layout | decode tok/s (batch 1) | comm share, decode | prefill tok/s (256) | comm share, prefill | rank 0 weight MB |"
echo "|---|---|---|---|---|---|"
for name in $LAYOUTS; do
  /usr/bin/python3 - "$OUT" "$name" <<'PY'
import glob, json, statistics, sys
out, name = sys.argv[1], sys.argv[2]
def rows(row):
    return [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{name}-{row}-*.json"))]
dec, pre = rows("decode"), rows("prefill")
med = lambda xs: statistics.median(xs)
print(f"| {name} | {med([r['decode_tok_s'] for r in dec]):.1f} | {100 * med([r['comm_share'] for r in dec]):.1f}% "
      f"| {med([r['prefill_tok_s'] for r in pre]):.1f} | {100 * med([r['comm_share'] for r in pre]):.1f}% "
      f"| {dec[0]['weight_bytes_all'] / 1e6:.0f} |")
PY
done
