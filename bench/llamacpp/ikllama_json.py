#!/usr/bin/env python3
"""Turns llama-bench's JSON (a list with one object per test; ik_llama.cpp's and llama.cpp's
llama-bench write the same fields) on stdin into the report fields summarize.py reads:
prefill_tok_s for a pp test, decode_tok_s and decode_step_ms for a tg test, each the median of
the repetitions' tok/s (samples_ts), with the build and the test's shape kept beside them.

Usage: ikllama_json.py pp|tg < llama-bench.json > report.json
"""
import json
import statistics
import sys


def main(mode):
    tests = json.load(sys.stdin)
    if not isinstance(tests, list) or len(tests) != 1:
        sys.exit("ikllama_json: expected one llama-bench test, got %r" % (tests,))
    t = tests[0]
    samples = t.get("samples_ts") or [t["avg_ts"]]
    tok_s = statistics.median(samples)
    report = {"engine": "ik_llama.cpp", "build_commit": t.get("build_commit"), "model_type": t.get("model_type"),
              "n_threads": t.get("n_threads"), "n_prompt": t.get("n_prompt"), "n_gen": t.get("n_gen"),
              "samples_ts": samples}
    if mode == "pp":
        report["prefill_tok_s"] = tok_s
    else:
        report["decode_tok_s"] = tok_s
        report["decode_step_ms"] = 1000.0 / tok_s if tok_s > 0 else 0.0
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("pp", "tg"):
        sys.exit("usage: ikllama_json.py pp|tg < llama-bench.json")
    main(sys.argv[1])
