#!/usr/bin/env python3
"""Does a sync of our own written data hold the disk? Polls /sys/block/vda/stat every 10 ms
while an O_DIRECT random reader runs, through phases: idle reads, buffered 2 GiB write + fdatasync,
direct 2 GiB write + fdatasync. Prints every stall over 20 ms with what completed when it ended."""
import os, mmap, random, threading, time, subprocess, sys
DEV = "vda"; DIR = sys.argv[1]
stop = False; phase = ["start"]; stalls = []
def stat():
    f = open(f"/sys/block/{DEV}/stat").read().split()
    v = list(map(int, f))
    return v[0], v[4], v[8], (v[11] if len(v) > 11 else 0), (v[15] if len(v) > 15 else 0)
def poll():
    last = None; stuck = None
    while not stop:
        t = time.monotonic() * 1000; r, w, inf, d, fl = stat()
        if last:
            lt, lr, lw, linf, ld, lfl = last
            done = (r - lr) + (w - lw) + (d - ld) + (fl - lfl)
            if inf > 0 and linf > 0 and done == 0:
                stuck = stuck or lt
            elif stuck is not None:
                dur = t - stuck
                if dur > 20:
                    what = ",".join(n for n, x in (("read", r - lr), ("write", w - lw), ("flush", fl - lfl)) if x)
                    stalls.append((phase[0], round(dur), what))
                stuck = None
        last = (t, r, w, inf, d, fl)
        time.sleep(0.01)
def reader(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT); buf = mmap.mmap(-1, 4096); n = os.fstat(fd).st_size // 4096; lat = []
    while not stop:
        t = time.monotonic(); os.preadv(fd, [buf], random.randrange(n) * 4096); lat.append((phase[0], time.monotonic() - t)); time.sleep(0.0005)
    os.close(fd); return lat
src = os.path.join(DIR, "readme"); 
if not os.path.exists(src):
    subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=1M", "count=1024", "status=none"], check=True); os.sync()
lat = []
tp = threading.Thread(target=poll); tp.start()
tr = threading.Thread(target=lambda: lat.extend(reader(src))); tr.start()
def run(name, cmd):
    phase[0] = name; t = time.monotonic(); subprocess.run(cmd, check=True); print(f"{name}: {time.monotonic()-t:.1f} s", flush=True)
phase[0] = "idle"; time.sleep(10)
for i in range(2):
    run(f"buffered-write+fdatasync-{i}", ["dd", "if=/dev/zero", f"of={DIR}/w{i}", "bs=1M", "count=2048", "conv=fdatasync", "status=none"])
    phase[0] = f"after-{i}"; time.sleep(5)
    run(f"direct-write+fdatasync-{i}", ["dd", "if=/dev/zero", f"of={DIR}/d{i}", "bs=1M", "count=2048", "oflag=direct", "conv=fdatasync", "status=none"])
    phase[0] = f"after-d{i}"; time.sleep(5)
stop = True; tp.join(); tr.join()
for i in range(2):
    for p in ("w", "d"):
        try: os.unlink(f"{DIR}/{p}{i}")
        except FileNotFoundError: pass
print("stalls over 20 ms (phase, ms, completed at its end):")
for s in stalls: print("  ", s)
by = {}
for p, l in lat: by.setdefault(p, []).append(l)
for p, l in by.items():
    l.sort(); print(f"reads {p}: n={len(l)} p99={l[int(len(l)*0.99)]*1000:.2f} ms max={l[-1]*1000:.1f} ms")
