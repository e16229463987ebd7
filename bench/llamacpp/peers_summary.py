#!/usr/bin/env python3
"""Summarises peers.sh's raw.txt ("round R ROW ENGINE TOK_S" per line) as a Markdown table: per
row and engine the tok/s of every round, and densa's (and densa without AMX's) ratio to each
peer, paired per round: the median and the range over the rounds.

Usage: peers_summary.py raw.txt > summary.md
"""
import collections
import statistics
import sys

PEERS = ("ik", "llama")
NAMES = {"ik": "ik_llama.cpp", "llama": "llama.cpp", "densa": "densa", "densa_noamx": "densa, DENSA_AMX=0"}


def main(path):
    runs = collections.defaultdict(dict)  # (row, engine) -> round -> tok/s
    order = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 5 or parts[0] != "round":
                sys.exit("peers_summary: bad line %r" % line)
            r, row, engine, tok_s = int(parts[1]), parts[2], parts[3], float(parts[4])
            runs[(row, engine)][r] = tok_s
            if row not in order:
                order.append(row)
    print("| row | engine | tok/s per round | / ik_llama.cpp: median [min, max] | / llama.cpp: median [min, max] |")
    print("|---|---|---|---|---|")
    for row in order:
        for engine in ("ik", "llama", "densa", "densa_noamx"):
            got = runs.get((row, engine))
            if not got:
                continue
            cells = []
            for peer in PEERS:
                ref = runs.get((row, peer), {})
                ratios = [got[r] / ref[r] for r in sorted(got) if r in ref and ref[r] > 0]
                if engine.startswith("densa") and ratios:
                    cells.append("%.2fx [%.2f, %.2f]" % (statistics.median(ratios), min(ratios), max(ratios)))
                else:
                    cells.append("")
            per_round = ", ".join("%.1f" % got[r] for r in sorted(got))
            print("| %s | %s | %s | %s | %s |" % (row, NAMES[engine], per_round, cells[0], cells[1]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
