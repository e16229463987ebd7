#!/usr/bin/env python3
"""One fixture's side-by-side accuracy table from gguf_accuracy.sh's OUT_DIR: per llama-quantize
file, densa's PPL / KL mean / KL p99 / same top-1 against the F16 file (OUT/<model>.json, densa
eval) beside llama.cpp's on the same windows (OUT/<model>-<TYPE>.llama.json), and densa's KL
mean over llama.cpp's.

Usage: accuracy_table.py OUT_DIR MODEL "TYPES..."
"""
import json
import os
import sys


def main(out, model, types):
    with open(os.path.join(out, model + ".json")) as fh:
        densa = {r["weights"]: r for r in json.load(fh)["results"]}
    print("| file | densa PPL | llama.cpp PPL | densa KL mean | llama.cpp KL mean | KL ratio | "
          "densa KL p99 | llama.cpp KL p99 | densa same top-1 | llama.cpp same top-1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with open(os.path.join(out, model + "-F16.llama.json")) as fh:
        f16 = json.load(fh)
    base = next(r for r in densa.values() if r.get("is_baseline"))
    print("| F16 | %.4f | %.4f | 0 | 0 | | | | | |" % (base["ppl"], f16["ppl_all"]))
    for t in types.split():
        path = os.path.join(out, "%s-%s.gguf" % (model, t))
        d = densa.get("file:" + path)
        with open(os.path.join(out, "%s-%s.llama.json" % (model, t))) as fh:
            ll = json.load(fh)
        if d is None or "error" in d:
            print("| %s | %s | %.4f | | %.5f | | | %.4f | | %.2f%% |" % (
                t, "error: " + (d or {}).get("error", "missing"), ll["ppl_all"], ll["kl_mean"], ll["kl_p99"],
                100 * ll["same_top1"]))
            continue
        kl = d["kl"]
        ratio = kl["mean"] / ll["kl_mean"] if ll["kl_mean"] > 0 else float("nan")
        print("| %s | %.4f | %.4f | %.5f | %.5f | %.2f | %.4f | %.4f | %.2f%% | %.2f%% |" % (
            t, d["ppl"], ll["ppl_all"], kl["mean"], ll["kl_mean"], ratio, kl["p99"], ll["kl_p99"],
            100 * kl["same_top1"], 100 * ll["same_top1"]))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
