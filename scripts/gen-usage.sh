#!/usr/bin/env bash
# Writes the "--help of every subcommand" section of docs/usage.md (between the help:begin
# and help:end markers) from the densa binary, so the page lists exactly the flags the binary
# takes. --check: write nothing, exit 1 (with a diff) if the page differs from the binary.
# Usage: scripts/gen-usage.sh [--check] [DENSA]   (default DENSA: build/densa)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
densa=${1:-build/densa}
[ -x "$densa" ] || { echo "gen-usage: no densa binary at $densa (build it: ninja -C build densa)" >&2; exit 2; }
page=docs/usage.md
commands=("" serve router generate info capacity quantize eval "bench serve" "bench offline" gen-model tokenize chat-template)
section=$(
  for c in "${commands[@]}"; do
    # shellcheck disable=SC2086
    echo; echo "### \`densa${c:+ $c} --help\`"; echo; echo '```text'
    "$densa" $c --help | sed -e "s|$densa|densa|g" -e 's/[[:space:]]*$//'
    echo '```'
  done
  echo
)
new=$(python3 - "$page" "$section" <<'PY'
import sys
page, section = sys.argv[1], sys.argv[2]
text = open(page, encoding="utf-8").read()
begin, end = "<!-- help:begin -->", "<!-- help:end -->"
a, b = text.index(begin) + len(begin), text.index(end)
sys.stdout.write(text[:a] + "\n" + section.strip("\n") + "\n\n" + text[b:])
PY
)
if [ "$check" = 1 ]; then
  if ! diff -u "$page" <(printf '%s\n' "$new") >&2; then
    echo "gen-usage: $page does not match '$densa --help'; run scripts/gen-usage.sh" >&2
    exit 1
  fi
else
  printf '%s\n' "$new" > "$page"
fi
