#!/usr/bin/env python3
"""The snapshot stream held to 32 MiB/s against unpaced: medians (min..max) of the 3 rounds.
Usage: streamsum.py DIR [PREFIX]; PREFIX "" for paced.sh's runs, "nice-" for nice.sh's."""
import json, statistics, sys, os
d0 = sys.argv[1] if len(sys.argv) > 1 else '/work/bench/s12/raft'
pre0 = sys.argv[2] if len(sys.argv) > 2 else ''
M = [('baseline read p99 (us)', lambda r: r['baseline']['reads']['latency']['p99']),
     ('stream read p99 (us)', lambda r: r['stream']['reads']['latency']['p99']),
     ('stream p99 / baseline p99', lambda r: r['stream']['reads']['latency']['p99'] / r['baseline']['reads']['latency']['p99']),
     ('baseline read p99.9 (us)', lambda r: r['baseline']['reads']['latency']['p999']),
     ('stream read p99.9 (us)', lambda r: r['stream']['reads']['latency']['p999']),
     ('stream service p99 (us)', lambda r: r['stream']['reads']['service']['p99']),
     ('stream lateness p99 (us)', lambda r: r['stream']['reads']['lateness']['p99']),
     ('readers CPU wait in the stream (s)', lambda r: r['stream']['reads']['reader_run_delay_s']),
     ('stream refaults', lambda r: r['stream']['refaults']),
     ('stream PSI memory full (ms)', lambda r: r['stream']['psi_full_ms']),
     ('snapshot duration (s)', lambda r: r['snapshot_secs']),
     ('snapshot MiB/s', lambda r: r['snapshot_bytes'] / r['snapshot_secs'] / 2**20)]
cols = [(pre0 + 'paced32', 'buffered', 'buffered, 32 MiB/s'), (pre0 + 'paced32', 'backup', 'backup, 32 MiB/s'), (pre0 + 'unpaced', 'backup', 'backup, unpaced')]
print('| | ' + ' | '.join(c[2] for c in cols) + ' |')
print('|---|' + '---|' * len(cols))
for name, f in M:
    cells = []
    for pre, mode, _ in cols:
        v = []
        for r in range(3):
            p = os.path.join(d0, f'{pre}-{r}', 'report.json')
            if not os.path.exists(p):
                continue
            for run in json.load(open(p))['runs']:
                if run['mode'] == mode:
                    try:
                        v.append(f(run))
                    except (KeyError, TypeError):
                        pass
        cells.append(f'{statistics.median(v):.4g} ({min(v):.4g}..{max(v):.4g})' if v else '')
    print(f'| {name} | ' + ' | '.join(cells) + ' |')
