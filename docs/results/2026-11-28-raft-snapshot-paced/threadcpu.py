#!/usr/bin/env python3
"""Samples the CPU time of every thread of processes whose command starts
with quietkv-raftkv, once a second, and prints per-second deltas of the
busiest threads (tid, process, thread name, ms of CPU in that second)."""
import os, sys, time
tick = os.sysconf('SC_CLK_TCK')
def sample():
    out = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
            if not cmd or b'quietkv-raftkv' not in cmd[0]:
                continue
            role = 'leader' if b'bench-snapshot-leader' in cmd else ('joiner' if b'--id' in cmd else 'parent')
            for tid in os.listdir(f'/proc/{pid}/task'):
                st = open(f'/proc/{pid}/task/{tid}/stat').read()
                name = st[st.index('(') + 1:st.rindex(')')]
                f = st[st.rindex(')') + 2:].split(' ')
                # schedstat: run time in ns, more exact than ticks
                ss = open(f'/proc/{pid}/task/{tid}/schedstat').read().split()
                out[(int(tid))] = (role, name, int(ss[0]), int(ss[1]))
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    return out
prev = sample()
t0 = time.time()
while True:
    time.sleep(1)
    cur = sample()
    rows = []
    for tid, (role, name, run, wait) in cur.items():
        p = prev.get(tid)
        dr = run - (p[2] if p else 0)
        dw = wait - (p[3] if p else 0)
        if dr > 5_000_000:
            rows.append((dr, dw, tid, role, name))
    rows.sort(reverse=True)
    ts = time.strftime('%H:%M:%S')
    print(ts, ' '.join(f'{role}/{name}/{tid}:{dr/1e6:.0f}ms(w{dw/1e6:.0f})' for dr, dw, tid, role, name in rows[:10]), flush=True)
    prev = cur
