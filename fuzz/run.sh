#!/usr/bin/env bash
# fuzz/run.sh SECONDS [TARGET...]: builds the libFuzzer targets (build-fuzz: Clang 14,
# -DDENSA_FUZZ=ON, ASan + UBSan) and fuzzes each for SECONDS of wall time, after replaying its
# crash regressions. The default is every target fuzz/CMakeLists.txt declares (the list CMake
# writes to build-fuzz/fuzz/fuzz_targets.txt), so a new target needs no edit here; each must
# have a non-empty seed corpus fuzz/corpus/<target>/. New coverage inputs go to
# build-fuzz/corpus/<target> (fuzz/corpus/<target> stays as committed); a crash, leak,
# sanitizer finding or FUZZ_ASSERT failure fails the run and leaves the input in
# build-fuzz/crashes/<target>/. At the end it prints, per target, the executions, the CPU
# time the fuzzer used (user + system), the coverage and the corpus size.
# Env: FUZZ_JOBS (parallel builds and fuzzers, default nproc), CLANG (default clang-14),
# FUZZ_BUILD (default build-fuzz).
# FUZZ_SEED=N makes a run repeatable: libFuzzer's -seed=N, starting from the committed seed
# corpus alone (a fresh $BUILD/corpus-seed<N>/<target>, as on a clean clone), so the inputs it
# tries are (nearly: libFuzzer keeps a little timing-dependent state) one sequence for a given
# tree; FUZZ_RUNS=M caps each target at M executions. A run cut short by SECONDS has tried a
# prefix of that sequence. CI uses this, so that what it
# executes has been executed before it lands (fuzz/README.md: "Fuzzing in CI").
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
JOBS=${FUZZ_JOBS:-$(nproc)}
CLANG=${CLANG:-clang-14}
BUILD=${FUZZ_BUILD:-build-fuzz}
if ! command -v "$CLANG" >/dev/null || ! command -v "${CLANG/clang/clang++}" >/dev/null; then
  echo "fuzz/run.sh: $CLANG not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

t0=$SECONDS
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDENSA_FUZZ=ON -DCMAKE_C_COMPILER="$CLANG" \
  -DCMAKE_CXX_COMPILER="${CLANG/clang/clang++}" -DDENSA_BUILD_TESTS=OFF -DDENSA_BUILD_BENCH=OFF >/dev/null
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets <"$BUILD/fuzz/fuzz_targets.txt"
fi
if ((${#targets[@]} == 0)); then
  echo "fuzz/run.sh: no fuzz targets in $BUILD/fuzz/fuzz_targets.txt" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  if ! compgen -G "fuzz/corpus/$t/*" >/dev/null; then
    echo "fuzz/run.sh: target $t has no seed corpus in fuzz/corpus/$t/ (fuzz/README.md: adding a target)" >&2
    exit 1
  fi
done
echo "fuzz/run.sh: ${#targets[@]} targets: ${targets[*]}"
# shellcheck disable=SC2046  # one word per target
cmake --build "$BUILD" -j "$JOBS" --target $(printf 'fuzz_%s ' "${targets[@]}")
echo "fuzz/run.sh: build $((SECONDS - t0)) s"

# One fuzzer: regressions replayed first (each must pass), then SECONDS of fuzzing. Writes its
# summary line to $BUILD/fuzz-<target>.summary.
fuzz_one() {
  local t=$1 bin=$BUILD/fuzz/fuzz_$1
  local corpus=$BUILD/corpus/$t crashes=$BUILD/crashes/$t log=$BUILD/fuzz-$t.log
  local summary=$BUILD/fuzz-$t.summary
  local fixed=()
  if [ -n "${FUZZ_SEED:-}" ]; then
    corpus=$BUILD/corpus-seed$FUZZ_SEED/$t
    rm -rf "$corpus"
    # -reload=0 and -entropic=0: corpus reloads run on a timer and the entropic schedule
    # weighs inputs by measured speed, either of which lets two runs of one seed drift apart.
    fixed+=(-seed="$FUZZ_SEED" -reload=0 -entropic=0)
  fi
  if [ -n "${FUZZ_RUNS:-}" ]; then fixed+=(-runs="$FUZZ_RUNS"); fi
  mkdir -p "$corpus" "$crashes"
  rm -f "$summary"
  local regs=()
  for f in fuzz/regressions/"$t"/*; do [ -f "$f" ] && [ "$(basename "$f")" != README.md ] && regs+=("$f"); done
  if ((${#regs[@]})); then
    "$bin" -runs=0 "${regs[@]}" >"$log" 2>&1 || {
      echo "$t: a regression input fails"
      cat "$log"
      printf '%-16s FAILED: a regression input fails\n' "$t" >"$summary"
      return 1
    }
  else
    : >"$log"
  fi
  # -max_len: 64 KiB covers every seed (the SentencePiece fixture is 15 KB) and keeps runs fast.
  # Bash's `time` measures the fuzzer's own CPU (user + system), which on a loaded machine is
  # less than its wall time; TIMEFORMAT makes it two numbers on one line.
  local rc=0 cpu
  cpu=$({ TIMEFORMAT='%U %S'; time "$bin" "$corpus" "fuzz/corpus/$t" -max_total_time="$SECONDS_EACH" \
      ${fixed[@]+"${fixed[@]}"} -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$crashes/" >>"$log" 2>&1; } 2>&1) || rc=$?
  cpu=$(awk '{printf "%.1f", $1 + $2}' <<<"$cpu")
  local runs cov
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')
  if ((rc == 0)); then
    printf '%-16s ok      %10s runs  %7s s CPU in at most %s s wall  cov %6s  corpus %5d\n' "$t" "$runs" "$cpu" \
      "$SECONDS_EACH" "$cov" "$(find "$corpus" -type f | wc -l)" >"$summary"
    echo "$t: ok"
  else
    printf '%-16s FAILED  %7s s CPU: input in %s/\n' "$t" "$cpu" "$crashes" >"$summary"
    echo "$t: FAILED"
    tail -60 "$log"
    return 1
  fi
}

failed=0
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= JOBS)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
if [ -n "${FUZZ_SEED:-}" ] || [ -n "${FUZZ_RUNS:-}" ]; then
  echo "fuzz/run.sh: per target (seed ${FUZZ_SEED:-random}, ${FUZZ_RUNS:-unlimited} runs or ${SECONDS_EACH} s wall each, ${JOBS} at a time):"
else
  echo "fuzz/run.sh: per target (${SECONDS_EACH} s wall each, ${JOBS} at a time):"
fi
for t in "${targets[@]}"; do
  cat "$BUILD/fuzz-$t.summary" 2>/dev/null || printf '%-16s FAILED (no summary)\n' "$t"
done
echo "fuzz/run.sh: $((SECONDS - t0)) s in all"
exit $failed
