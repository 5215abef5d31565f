#!/usr/bin/env python3
"""Probe: find quietkv-bg-* threads of any quietkv process and give them a
short EEVDF slice (sched_setattr SCHED_OTHER, sched_runtime=ns) or SCHED_IDLE."""
import ctypes, os, sys, time, glob, struct
libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr = 314
mode = sys.argv[1]  # "slice:NS" or "idle"
prefix = sys.argv[3] if len(sys.argv) > 3 else "quietkv-bg"
class Attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("prio", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64), ("util_min", ctypes.c_uint32), ("util_max", ctypes.c_uint32)]
done = set()
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for comm in glob.glob('/proc/[0-9]*/task/*/comm'):
        try:
            name = open(comm).read().strip()
        except OSError:
            continue
        if not (name == prefix if prefix == "quietkv" else name.startswith(prefix)):
            continue
        tid = int(comm.split('/')[4])
        if tid in done: continue
        a = Attr(); a.size = ctypes.sizeof(Attr)
        if mode == 'idle':
            a.policy = 5
        else:
            a.policy = 0; a.runtime = int(mode.split(':')[1])
        rc = libc.syscall(SYS_sched_setattr, tid, ctypes.byref(a), 0)
        print(tid, name, mode, rc, ctypes.get_errno(), flush=True)
        done.add(tid)
    time.sleep(0.05)
