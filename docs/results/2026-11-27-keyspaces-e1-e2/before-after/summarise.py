#!/usr/bin/env python3
"""Summarises run.sh's E1/E2 runs: the build from before keyspaces (old)
against this one (new), one keyspace, one report per binary and round."""
import json, statistics, sys, os
d = sys.argv[1] if len(sys.argv) > 1 else '.'
METRICS = [
    ('p99 read (us)', lambda m: m['read_latency_us']['p99']),
    ('p99.9 read (us)', lambda m: m['read_latency_us']['p999']),
    ('p50 read (us)', lambda m: m['read_latency_us']['p50']),
    ('p99 service (us)', lambda m: m['service_time_us']['p99']),
    ('baseline p99 (us)', lambda m: m['baseline_read_latency_us']['p99']),
    ('background MiB/s', lambda m: m['compaction_mib_s']),
    ('background CPU s', lambda m: m['extra'].get('background_cpu_s')),
    ('background CPU s/GiB', lambda m: m['extra'].get('background_cpu_s_per_gib')),
    ('process CPU s (exact)', lambda m: m['cpu']['run_s']),
    ('CPU steal ms/s', lambda m: m['steal_ms_per_s']),
    ('other CPU ms/s', lambda m: m['other_cpu_ms_per_s']),
]
for exp in ['E1', 'E2']:
    vals = {}
    for who in ['old', 'new']:
        for r in range(3):
            p = os.path.join(d, f'{exp}-{who}-{r}', 'report.json')
            if not os.path.exists(p):
                continue
            m = json.load(open(p))['experiments'][0]['modes'][0]
            for name, f in METRICS:
                try:
                    v = f(m)
                except (KeyError, TypeError):
                    v = None
                if v is not None:
                    vals.setdefault((name, who), []).append(v)
    print(f'\n### {exp}\n')
    print('| metric | before keyspaces (7d97ed0) | now | now / before |')
    print('|---|---|---|---|')
    for name, _ in METRICS:
        o, n = vals.get((name, 'old'), []), vals.get((name, 'new'), [])
        if not o or not n:
            continue
        fmt = lambda xs: f'{statistics.median(xs):.4g} ({min(xs):.4g}..{max(xs):.4g})'
        mo, mn = statistics.median(o), statistics.median(n)
        ratio = f'{mn / mo:.2f}' if mo else ''
        print(f'| {name} | {fmt(o)} | {fmt(n)} | {ratio} |')
