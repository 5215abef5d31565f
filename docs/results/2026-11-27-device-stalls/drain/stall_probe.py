#!/usr/bin/env python3
"""Like stall_probe.py, but records for every stall over 20 ms the reads and writes in flight
when it was first seen, and the MiB the device completed in the poll that ended it and the
poll after, so a stall can be judged by what the device moved across it."""
import os, mmap, random, threading, time, subprocess, sys
DEV = "vda"; DIR = sys.argv[1]
stop = False; phase = ["start"]; stalls = []
def stat():
    v = list(map(int, open(f"/sys/block/{DEV}/stat").read().split()))
    return v[0], v[4], v[8], v[11], v[15], v[2] + v[6]
def inflight():
    return tuple(map(int, open(f"/sys/block/{DEV}/inflight").read().split()))
def poll():
    last = None; stuck = None; pending = None
    while not stop:
        t = time.monotonic() * 1000; r, w, inf, d, fl, sec = stat()
        if last:
            lt, lr, lw, linf, ld, lfl, lsec = last
            done = (r - lr) + (w - lw) + (d - ld) + (fl - lfl)
            if pending is not None:
                pending[3] += (sec - lsec) / 2048; stalls.append(tuple(pending)); pending = None
            if inf > 0 and linf > 0 and done == 0:
                if stuck is None: stuck = (lt, inflight())
            elif stuck is not None:
                dur = t - stuck[0]
                if dur > 20:
                    pending = [phase[0], round(dur), stuck[1], (sec - lsec) / 2048]
                stuck = None
        last = (t, r, w, inf, d, fl, sec)
        time.sleep(0.01)
def reader(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT); buf = mmap.mmap(-1, 4096); n = os.fstat(fd).st_size // 4096; lat = []
    while not stop:
        t = time.monotonic(); os.preadv(fd, [buf], random.randrange(n) * 4096); lat.append((phase[0], time.monotonic() - t)); time.sleep(0.0005)
    os.close(fd); return lat
src = os.path.join(DIR, "readme")
if not os.path.exists(src):
    subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=1M", "count=1024", "status=none"], check=True); os.sync()
lat = []
tp = threading.Thread(target=poll); tp.start()
tr = threading.Thread(target=lambda: lat.extend(reader(src))); tr.start()
def run(name, cmd):
    phase[0] = name; t = time.monotonic(); subprocess.run(cmd, check=True); print(f"{name}: {time.monotonic()-t:.1f} s", flush=True)
phase[0] = "idle"; time.sleep(5)
for i in range(2):
    run(f"buffered-{i}", ["dd", "if=/dev/zero", f"of={DIR}/w{i}", "bs=1M", "count=2048", "conv=fdatasync", "status=none"])
    phase[0] = f"after-{i}"; time.sleep(3)
    run(f"direct-{i}", ["dd", "if=/dev/zero", f"of={DIR}/d{i}", "bs=2M", "count=1024", "oflag=direct", "conv=fdatasync", "status=none"])
    phase[0] = f"after-d{i}"; time.sleep(3)
stop = True; tp.join(); tr.join()
for i in range(2):
    for p in ("w", "d"):
        try: os.unlink(f"{DIR}/{p}{i}")
        except FileNotFoundError: pass
print("stalls over 20 ms (phase, ms, (reads, writes) in flight at start, MiB completed at end + next poll, MiB/s over the stall):")
for s in stalls: print("  ", s[:4], round(s[3] / (s[1] / 1000)))
by = {}
for p, l in lat: by.setdefault(p, []).append(l)
for p, l in by.items():
    l.sort(); print(f"reads {p}: n={len(l)} p99={l[int(len(l)*0.99)]*1000:.2f} ms max={l[-1]*1000:.1f} ms")
