#!/usr/bin/env python3
"""Medians (min..max) over the rounds of each configuration of a snapshot-stream campaign.
Usage: streamsum.py DIR PREFIX:MODE[:LABEL] ...
Each configuration is the runs DIR/PREFIX-<round>/report.json of mode MODE (buffered or backup);
runs the bench judged disturbed (a non-empty "disturbed") are counted but left out."""
import json, os, statistics, sys

M = [('baseline read p99 (us)', lambda r: r['baseline']['reads']['latency']['p99']),
     ('stream read p99 (us)', lambda r: r['stream']['reads']['latency']['p99']),
     ('stream p99 / baseline p99', lambda r: r['stream']['reads']['latency']['p99'] / r['baseline']['reads']['latency']['p99']),
     ('baseline read p99.9 (us)', lambda r: r['baseline']['reads']['latency']['p999']),
     ('stream read p99.9 (us)', lambda r: r['stream']['reads']['latency']['p999']),
     ('stream p99.9 / baseline p99.9', lambda r: r['stream']['reads']['latency']['p999'] / r['baseline']['reads']['latency']['p999']),
     ('stream service p99 (us)', lambda r: r['stream']['reads']['service']['p99']),
     ('stream lateness p99 (us)', lambda r: r['stream']['reads']['lateness']['p99']),
     ('readers CPU wait in the stream (s)', lambda r: r['stream']['reads']['reader_run_delay_s']),
     ('stream refaults', lambda r: r['stream']['refaults']),
     ('stream PSI memory full (ms)', lambda r: r['stream']['psi_full_ms']),
     ('snapshot duration (s)', lambda r: r['snapshot_secs']),
     ('snapshot MiB/s', lambda r: r['snapshot_bytes'] / r['snapshot_secs'] / 2**20)]


def runs(d, prefix, mode):
    out = []
    r = 0
    while True:
        p = os.path.join(d, f'{prefix}-{r}', 'report.json')
        if not os.path.exists(p):
            if r > 9:
                return out
            r += 1
            continue
        out += [run for run in json.load(open(p))['runs'] if run['mode'] == mode]
        r += 1


def main():
    d = sys.argv[1]
    cols = []
    for spec in sys.argv[2:]:
        parts = spec.split(':')
        cols.append((parts[0], parts[1], parts[2] if len(parts) > 2 else f'{parts[0]} {parts[1]}'))
    print('| | ' + ' | '.join(c[2] for c in cols) + ' |')
    print('|---|' + '---|' * len(cols))
    every = [runs(d, p, m) for p, m, _ in cols]
    data = [[r for r in v if not r.get('disturbed')] for v in every]
    def count(v, a):
        if any('disturbed' not in r for r in a):
            return f'{len(a)} (not judged: a bench without the rule)'
        return f'{len(v)} ({len(a) - len(v)})'
    print('| clean runs (set aside as disturbed) | ' + ' | '.join(count(v, a) for v, a in zip(data, every)) + ' |')
    for name, f in M:
        cells = []
        for rs in data:
            v = []
            for run in rs:
                try:
                    v.append(f(run))
                except (KeyError, TypeError, ZeroDivisionError):
                    pass
            cells.append(f'{statistics.median(v):.4g} ({min(v):.4g}..{max(v):.4g})' if v else '')
        print(f'| {name} | ' + ' | '.join(cells) + ' |')


main()
