"""Reader waits over 2 ms in a `perf sched timehist -g --state` listing:
what the thread was waiting in (the state and kernel stack it switched
out with), and when (a histogram in 0.25 s steps from the first event).
Reader threads carry the process's name; the engine's own threads are
named quietkv-bg-N and quietkv-wal-sync."""
import collections
import re
import sys

last = {}
kinds = collections.Counter()
kind_ms = collections.Counter()
when = collections.Counter()
t0 = None
for line in open(sys.argv[1]):
    parts = line.split(None, 7)
    if len(parts) < 7 or not re.match(r"^\d+\.\d+$", parts[0]):
        continue
    t = float(parts[0])
    t0 = t0 if t0 is not None else t
    task, state = parts[2], parts[6]
    stack = parts[7].strip() if len(parts) > 7 else ""
    try:
        wait = float(parts[3])
    except ValueError:
        continue
    m = re.search(r"\[(\d+)", task)
    tid = m.group(1) if m else task
    reader = task.startswith("quietkv") and not task.startswith(
        ("quietkv-bg", "quietkv-wal")
    )
    if reader and tid in last and wait > 2.0:
        pstate, pstack = last[tid]
        key = pstate + " | " + " <- ".join(pstack.split(" <- ")[:5])
        kinds[key] += 1
        kind_ms[key] += wait
        if pstate == "D":
            when[int((t - t0) * 4) / 4] += 1
    last[tid] = (state, stack)
print("waits over 2 ms by what the reader waited in (count, total ms):")
for k, n in kinds.most_common(8):
    print(f"{n:7d} {kind_ms[k]:10.1f}  {k}")
print("\nI/O waits over 2 ms by time (s from the start of the trace):")
for k in sorted(when):
    print(f"{k:6.2f} {when[k]:3d} " + "#" * when[k])
