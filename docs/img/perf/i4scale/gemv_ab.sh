#!/bin/bash
# Interleaved A/B of the INT4 decode GEMV rows: base (main 105ee19) vs new (i4scale), one benchmark per process.
cd "$(dirname "$0")"
for round in 1 2 3 4; do
  for name in int4_g32/7168x2048/threads:1 int4_g32/4096x14336/threads:1 int4_g32/7168x2048/threads:2 int4_g32/4096x14336/threads:2 int4_g128/7168x2048/threads:1 int4_g128/4096x14336/threads:2; do
    for v in base new; do
      if [ $v = base ]; then B=/tmp/i4scale-base/gemv_bench; else B=/tmp/i4scale-new-gemv; fi
      echo "$v r$round $(uptime | sed 's/.*load average: //') $($B --benchmark_filter="^gemv/$name/real_time\$" --benchmark_min_time=0.3 2>/dev/null | grep '^gemv/')"
    done
  done
done
