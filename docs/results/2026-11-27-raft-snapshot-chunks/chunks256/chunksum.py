#!/usr/bin/env python3
"""256 KiB against 512 KiB snapshot chunks (chunks256.sh): per run and medians."""
import json, statistics, sys, os
d0 = sys.argv[1] if len(sys.argv) > 1 else '/work/bench/s36'
M = [('baseline p99 (us)', lambda r: r['baseline']['reads']['latency']['p99']),
     ('stream p99 (us)', lambda r: r['stream']['reads']['latency']['p99']),
     ('stream p99.9 (us)', lambda r: r['stream']['reads']['latency']['p999']),
     ('stream service p99 (us)', lambda r: r['stream']['reads']['service']['p99']),
     ('stream lateness p99 (us)', lambda r: r['stream']['reads']['lateness']['p99']),
     ('readers CPU wait (s)', lambda r: r['stream']['reads']['reader_run_delay_s']),
     ('snapshot duration (s)', lambda r: r['snapshot_secs'])]
print('| | ' + ' | '.join(f'{int(c)//1024} KiB' for c in ['262144', '524288']) + ' |')
print('|---|---|---|')
for name, f in M:
    cells = []
    for c in ['262144', '524288']:
        v = []
        for r in range(3):
            p = os.path.join(d0, f'c{c}-{r}', 'report.json')
            if os.path.exists(p):
                v.append(f(json.load(open(p))['runs'][0]))
        cells.append(f'{statistics.median(v):.4g} ({min(v):.4g}..{max(v):.4g})' if v else '')
    print(f'| {name} | ' + ' | '.join(cells) + ' |')
