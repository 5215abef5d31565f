#!/usr/bin/env python3
"""From `perf script` of sched_wakeup/sched_switch: for the leader's reader threads, each wait from wakeup to running, and which task ran on that CPU just before (the one the reader waited behind)."""
import re, sys, collections
wake = {}
waits = collections.defaultdict(list)   # next tid -> [(delay_us, prev_comm)]
behind = collections.defaultdict(lambda: [0, 0.0])  # prev comm -> [count, total us] for delays > 200 us
pat_wake = re.compile(r'\s(\d+\.\d+):\s+sched:sched_wakeup:.*?(?:pid=|\S+:)(\d+)')
for line in sys.stdin:
    if 'sched_waking' in line or 'sched_wakeup' in line:
        m = re.search(r'\s(\d+\.\d+):\s+sched:sched_wak(?:ing|eup(?:_new)?):\s+(\S+):(\d+)', line) or re.search(r'\s(\d+\.\d+):\s+sched:sched_wak(?:ing|eup(?:_new)?):\s+comm=(\S+) pid=(\d+)', line)
        if m:
            wake[int(m.group(3))] = float(m.group(1))
    elif 'sched_switch' in line:
        m = re.search(r'\s(\d+\.\d+):\s+sched:sched_switch:\s+(\S+):(\d+) \[\d+\] \S+ ==> (\S+):(\d+)', line) or re.search(r'\s(\d+\.\d+):\s+sched:sched_switch:\s+prev_comm=(\S+) prev_pid=(\d+).*next_comm=(\S+) next_pid=(\d+)', line)
        if not m:
            continue
        t, pcomm, ppid, ncomm, npid = float(m.group(1)), m.group(2), int(m.group(3)), m.group(4), int(m.group(5))
        w = wake.pop(npid, None)
        if w is not None:
            waits[(npid, ncomm)].append(((t - w) * 1e6, f'{pcomm}:{ppid}'))
# readers: the 4 threads with the most wakeups named quietkv-raftkv*
cands = sorted(((len(v), k) for k, v in waits.items() if k[1].startswith('quietkv-raftkv')), reverse=True)[:4]
print('readers:', [(k, n) for n, k in cands])
allw = []
for n, k in cands:
    allw += waits[k]
allw.sort()
N = len(allw)
print('reader wakeups', N, 'p50/p99/max wait us', round(allw[N//2][0]), round(allw[int(N*0.99)][0]), round(allw[-1][0]))
for d, who in allw:
    if d > 200:
        b = behind[who.rsplit(':', 1)[0]]
        b[0] += 1; b[1] += d
print('waits over 200 us, by the task that ran before:')
for who, (c, tot) in sorted(behind.items(), key=lambda x: -x[1][1])[:12]:
    print(f'  {who}: {c} waits, {tot/1000:.1f} ms')
by_tid = collections.defaultdict(lambda: [0, 0.0])
for d, who in allw:
    if d > 200:
        b = by_tid[who]; b[0] += 1; b[1] += d
print('by task:')
for who, (c, tot) in sorted(by_tid.items(), key=lambda x: -x[1][1])[:10]:
    print(f'  {who}: {c} waits, {tot/1000:.1f} ms')
