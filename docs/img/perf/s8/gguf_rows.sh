#!/usr/bin/env bash
# Session 8 (#10): the issue's 64-parallel and 4K-context rows on the GGUF formats (MoE shape),
# now that Q4_0 / Q8_0 run on the VNNI kernels. Usage: gguf_rows.sh DENSA OUT
set -u
B=$1; OUT=$2
M=${MODEL_DIR:-/tmp/densa-perf-models}
MEMBW=${MEMBW:-./build/membw_bench}
bw() { echo "membw | $($MEMBW --benchmark_min_time=0.5 2>&1 | grep '1GiB/threads:2' | sed 's/.*GB=/GB=/')" | tee -a "$OUT"; }
run() {  # label model extra...
  local label=$1 model=$2; shift 2
  echo "$label | load $(uptime | sed 's/.*load average: //') | $($B bench offline -m $M/$model "$@" 2>&1 | grep -E 'prefill:|decode:|KV|achieved:' | tr '\n' ' ')" | tee -a "$OUT"
}
bw
for kv in bf16 fp8; do
  run "64 parallel moe q8_0 kv $kv" moe-0-q8_0.gguf --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype $kv --no-routing-replay
  run "64 parallel moe q4_0 kv $kv" moe-0-q4_0.gguf --batch 64 --prompt-len 128 --gen-len 32 --repeats 1 --kv-dtype $kv --no-routing-replay
done
for kv in bf16 fp8; do
  run "4k context moe q8_0 kv $kv" moe-0-q8_0.gguf --batch 1 --prompt-len 4096 --gen-len 128 --repeats 1 --kv-dtype $kv
  run "4k context moe q4_0 kv $kv" moe-0-q4_0.gguf --batch 1 --prompt-len 4096 --gen-len 128 --repeats 1 --kv-dtype $kv
done
bw
