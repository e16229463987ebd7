#!/usr/bin/env bash
# The kernel rows of docs/benchmarks.md "Session 13": kernel_ab (built by kernel_ab.sh) at 4,096
# and 1,024 (decode) or 512 (prefill run) tokens of context, 2 threads, from DRAM.
# usage: kernel_ab_table.sh KERNEL_AB_BINARY OUT_FILE ROUNDS
set -u
bin=$1 out=$2 rounds=$3
: > "$out"
for ctx in 4096 1024; do
  for kv in 0 1 2; do NQ=1 "$bin" "$ctx" "$kv" 2 "$rounds" | tee -a "$out"; done
done
for ctx in 4096 512; do
  for kv in 0 2; do NQ=16 "$bin" "$ctx" "$kv" 2 "$rounds" | tee -a "$out"; done
done
