"""Summarises an A/B of two binaries on the standard workloads: for every value
size and workload, each figure's NEW and OLD values per round, the medians and
their ratio (NEW / OLD)."""
import json, glob, sys
runs = {}
for f in sorted(glob.glob(sys.argv[1] + '/*-*/report.json')):
    tag = f.split('/')[-2]
    side, rnd = tag.split('-')
    for run in json.load(open(f))['runs']:
        for ph in run['phases']:
            runs.setdefault((run['value_size'], ph['workload']), {}).setdefault(side, []).append(ph)
only = sys.argv[2].split(',') if len(sys.argv) > 2 else None
med = lambda v: sorted(v)[len(v) // 2]
for (vs, w), d in runs.items():
    if only and w not in only: continue
    for fig in ('ops_s', 'p50_us', 'p99_us', 'p999_us', 'cpu_us_per_op'):
        n = [p[fig] for p in d.get('NEW', []) if p.get(fig) is not None]
        o = [p[fig] for p in d.get('OLD', []) if p.get(fig) is not None]
        if not n or not o: continue
        r = med(n) / med(o) if med(o) else float('nan')
        f = lambda v: '/'.join(f'{x:.0f}' if x >= 100 else f'{x:.1f}' for x in v)
        print(f"{vs:5} {w:16} {fig:14} NEW {f(n):24} OLD {f(o):24} {r:5.2f}")
