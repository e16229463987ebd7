#!/usr/bin/env bash
# Do this VM's two vCPUs compute like two cores? One single-threaded benchmark alone, then two
# copies at once pinned to CPU 0 and CPU 1, in rounds: a compute-bound one (an INT4 GEMV whose
# 0.5 MiB of weights stay in L2) and a bandwidth-bound one (a 1 GiB streaming read).
# Prints time per iteration: the GEMV call, or one read of the 1 GiB.
# usage (from the repository root, after `ninja -C build`): cores.sh OUT_FILE ROUNDS
set -u
out=$1 rounds=$2
: > "$out"
run() {  # BINARY FILTER CPU
  taskset -c "$3" "$1" --benchmark_filter="$2" --benchmark_min_time=2 2>&1 | grep -E '^(gemv|membw)' |
    awk '{print $2, $3}'
}
for r in $(seq 1 "$rounds"); do
  for c in "build/gemv_bench gemv_hot/int4_g32_tiles/1024x1024/threads:1" \
           "build/membw_bench membw/read_1GiB/threads:1"; do
    set -- $c
    alone=$(run "$1" "$2" 0)
    run "$1" "$2" 0 > /tmp/cores_pair0.$$ &
    pair1=$(run "$1" "$2" 1)
    wait
    echo "round $r $2 | alone: $alone | two at once: $(cat /tmp/cores_pair0.$$) and $pair1" | tee -a "$out"
  done
done
rm -f /tmp/cores_pair0.$$
