#!/bin/bash
# Interleaved A/B (A = main 105ee19, B = i4scale) of batch-1 decode on the INT4 g32 perf models.
cd "$(dirname "$0")"
for round in 1 2 3; do
  for m in dense-0-int4 moe-0-int4; do
    for v in base new; do
      if [ $v = base ]; then B=/tmp/i4scale-base/densa; else B=/tmp/i4scale-new-densa; fi
      echo "=== $v $m r$round load $(uptime | sed 's/.*load average: //')"
      $B bench offline -m /tmp/densa-perf-models/$m --batch 1 --prompt-len 16 --gen-len 128 --repeats 3 --json offline-$v-$m-r$round.json 2>&1 | tail -8
    done
  done
done
echo done
