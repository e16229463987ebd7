#!/usr/bin/env python3
# Medians per (kind, model, format, variant) from a measure.sh (rows / tiles) or compare.sh
# (base / new) log, each run in order, and how often the second variant was faster.
import re, statistics, sys
from collections import defaultdict
vals = defaultdict(list)
membw = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split('|')]
    if f[0] == 'membw':
        membw.append(float(re.search(r'GB=([\d.]+)', f[1]).group(1)))
        continue
    kind, model, fmt, layout = f[0].split()
    m = re.search(r'decode:\s+([\d.]+)', f[2]) if kind == 'decode' else re.search(r'prefill:\s+([\d.]+)', f[2])
    vals[(kind, model, fmt, layout)].append(float(m.group(1)))
print('membw GB/s:', ', '.join(f'{x:.1f}' for x in membw))
variants = sorted({k[3] for k in vals}, key=lambda v: {'rows': 0, 'base': 0}.get(v, 1))
first, second = variants[0], variants[1]
for key in sorted({k[:3] for k in vals}):
    r, t = vals[key + (first,)], vals[key + (second,)]
    wins = sum(b > a for a, b in zip(r, t))
    print(f"{' '.join(key):22s} {first} {', '.join(f'{x:.1f}' for x in r)} (median {statistics.median(r):.1f}) | "
          f"{second} {', '.join(f'{x:.1f}' for x in t)} (median {statistics.median(t):.1f}) | "
          f"{statistics.median(t) / statistics.median(r):.2f}x, {second} faster in {wins} of {len(r)}")
