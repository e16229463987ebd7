#!/usr/bin/env bash
# fuzz/run.sh SECONDS [TARGET...]: builds the libFuzzer targets (build-fuzz: Clang 14,
# -DDENSA_FUZZ=ON, ASan + UBSan) and fuzzes each (default: all of fuzz/corpus/*) for SECONDS
# of wall time, after replaying its crash regressions. New coverage inputs go to
# build-fuzz/corpus/<target> (seeded from fuzz/corpus/<target>, which stays as committed); a
# crash, leak, sanitizer finding or FUZZ_ASSERT failure stops with a non-zero status and leaves
# the input in build-fuzz/crashes/<target>/. Env: FUZZ_JOBS (parallel builds and fuzzers,
# default nproc), CLANG (default clang-14), FUZZ_BUILD (default build-fuzz).
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
targets=("$@")
if ((${#targets[@]} == 0)); then
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

t0=$SECONDS
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDENSA_FUZZ=ON -DCMAKE_C_COMPILER="$CLANG" \
  -DCMAKE_CXX_COMPILER="${CLANG/clang/clang++}" -DDENSA_BUILD_TESTS=OFF -DDENSA_BUILD_BENCH=OFF >/dev/null
# shellcheck disable=SC2046  # one word per target
cmake --build "$BUILD" -j "$JOBS" --target $(printf 'fuzz_%s ' "${targets[@]}")
echo "fuzz/run.sh: build $((SECONDS - t0)) s"

# One fuzzer: regressions replayed first (each must pass), then SECONDS of fuzzing.
fuzz_one() {
  local t=$1 bin=$BUILD/fuzz/fuzz_$1
  local corpus=$BUILD/corpus/$t crashes=$BUILD/crashes/$t
  mkdir -p "$corpus" "$crashes"
  local regs=()
  for f in fuzz/regressions/"$t"/*; do [ -f "$f" ] && [ "$(basename "$f")" != README.md ] && regs+=("$f"); done
  if ((${#regs[@]})); then
    "$bin" -runs=0 "${regs[@]}" >"$BUILD/fuzz-$t.log" 2>&1 || { echo "$t: a regression input fails"; cat "$BUILD/fuzz-$t.log"; return 1; }
  fi
  # -max_len: 64 KiB covers every seed (the SentencePiece fixture is 15 KB) and keeps runs fast.
  if "$bin" "$corpus" "fuzz/corpus/$t" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" >>"$BUILD/fuzz-$t.log" 2>&1; then
    echo "$t: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/fuzz-$t.log" | grep -o '[0-9]*$') runs in ${SECONDS_EACH}s, corpus $(ls "$corpus" | wc -l)"
  else
    echo "$t: FAILED (input in $crashes/)"
    tail -60 "$BUILD/fuzz-$t.log"
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
echo "fuzz/run.sh: $((SECONDS - t0)) s in all"
exit $failed
