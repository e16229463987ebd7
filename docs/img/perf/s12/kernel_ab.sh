#!/usr/bin/env bash
# Session 12, kernel level: BM_PathsInterleaved (AVX-512 and AMX calls alternating in one process,
# 1 GiB cache, so from DRAM) of two attention_bench binaries built from the same bench source,
# old kernels (2e51fb1) and new, in interleaved rounds. Each line: binary, then per benchmark the
# AMX and AVX-512 mean us per call and their ratio.
# usage: kernel_ab.sh OLD_BENCH NEW_BENCH OUT_FILE ROUNDS
set -u
old=$1 new=$2 out=$3 rounds=$4
: > "$out"
for r in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    "$bin" --benchmark_filter='PathsInterleaved/ctx:(1024|4096)/kv:[012]/threads:0/shape:1' --benchmark_min_time=1 \
      --benchmark_counters_tabular=true 2>/dev/null | grep '^BM_' |
      awk -v r="$r" -v w="$which" '{split($1, a, "/"); printf "round %s %s | %s %s %s | amx %s avx512 %s amx/avx512 %s\n", r, w, a[2], a[3], $10 ($11 == "" ? "" : " " $11), $8, $9, $7}' | tee -a "$out"
  done
done
