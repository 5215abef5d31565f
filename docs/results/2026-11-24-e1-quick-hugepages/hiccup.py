import time, sys, os
# Sleeps 1 ms in a loop (run under chrt -f, so it preempts any normal thread);
# records how late each wake-up is. A late wake-up at real-time priority
# means no vCPU could run it: the VM itself was not running (or IRQs off).
dur = float(sys.argv[1]); out = sys.argv[2]
end = time.monotonic() + dur
late = []
t = time.monotonic()
def steal():
    with open('/proc/stat') as f:
        for l in f:
            if l.startswith('cpu '):
                return int(l.split()[8])
s0 = steal()
while t < end:
    target = t + 0.001
    time.sleep(0.001)
    now = time.monotonic()
    late.append((now, now - target))
    t = now
s1 = steal()
with open(out, 'w') as f:
    for a, b in late:
        f.write(f"{a:.6f} {b*1e6:.0f}\n")
big = sorted(b for _, b in late)
n = len(big)
print(f"samples {n} p50 {big[n//2]*1e6:.0f}us p99 {big[int(n*.99)]*1e6:.0f}us p999 {big[int(n*.999)]*1e6:.0f}us max {big[-1]*1e6:.0f}us; >5ms: {sum(1 for b in big if b>0.005)}; steal jiffies {s1-s0}")
