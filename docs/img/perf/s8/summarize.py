#!/usr/bin/env python3
# Medians per (kind, model, format, layout) from a measure.sh log; prints per-round pairs too.
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
for key in sorted({k[:3] for k in vals}):
    r, t = vals[key + ('rows',)], vals[key + ('tiles',)]
    wins = sum(b > a for a, b in zip(r, t))
    print(f"{' '.join(key):22s} rows {', '.join(f'{x:.1f}' for x in r)} (median {statistics.median(r):.1f}) | "
          f"tiles {', '.join(f'{x:.1f}' for x in t)} (median {statistics.median(t):.1f}) | "
          f"{statistics.median(t) / statistics.median(r):.2f}x, tiles faster in {wins} of {len(r)}")
