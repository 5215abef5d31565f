#!/usr/bin/env python3
"""Median and min..max of doctor --json outputs grouped by file-name prefix
(everything before the trailing -<round>.json)."""
import json, re, sys, glob, statistics, os
from collections import defaultdict

def fmt(xs):
    xs = sorted(xs)
    return f"{statistics.median(xs):.0f} ({xs[0]:.0f}..{xs[-1]:.0f})"

groups = defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "doctor-*.json"))):
    m = re.match(r"doctor-(.*)-(\d+)\.json$", os.path.basename(f))
    try:
        groups[m.group(1)].append(json.load(open(f)))
    except Exception as e:
        print(f"skip {f}: {e}", file=sys.stderr)
for g, runs in groups.items():
    print(f"## {g} ({len(runs)} runs)")
    modes = [t["mode"] for t in runs[0]["selftest"]]
    for mode in modes:
        w = [t["write_mib_s"] for r in runs for t in r["selftest"] if t["mode"] == mode]
        rd = [t["read_mib_s"] for r in runs for t in r["selftest"] if t["mode"] == mode]
        print(f"  {mode:<10} write {fmt(w):<22} read {fmt(rd)}")
    if "device_reference" in runs[0]:
        for i, d in enumerate(runs[0]["device_reference"]):
            w = [r["device_reference"][i]["write_mib_s"] for r in runs]
            rd = [r["device_reference"][i]["read_mib_s"] for r in runs]
            print(f"  device q{d['depth']:<3} write {fmt(w):<22} read {fmt(rd)}")
        # Per-run ratios of direct to the reference at the deepest depth,
        # and of direct write to buffered write (+ fdatasync).
        rw, rr, rb = [], [], []
        for r in runs:
            st = {t["mode"]: t for t in r["selftest"]}
            ref = r["device_reference"][-1]
            if "direct" in st:
                rw.append(st["direct"]["write_mib_s"] / ref["write_mib_s"])
                rr.append(st["direct"]["read_mib_s"] / ref["read_mib_s"])
                rb.append(st["direct"]["write_mib_s"] / st["buffered"]["write_mib_s"])
        if rw:
            f2 = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f})"
            print(f"  direct/device write {f2(rw)}  read {f2(rr)}  direct/buffered write {f2(rb)}")
