#!/bin/bash
# Disk health probe: 8 synchronous direct 4 KiB random readers for 15 s,
# with the CPU steal the machine showed meanwhile (the probe keeps the CPUs busy enough to see it).
F=${PROBE_FILE:-./probe.dat}   # a 2 GiB file on the disk under test, made on first use
[ -f $F ] || fio --name=mk --filename=$F --size=2G --rw=write --bs=1M --direct=1 >/dev/null
OUT=${1:-/dev/stdout}
s0=$(awk '/^cpu /{print $9}' /proc/stat)
J=$(fio --name=probe --filename=$F --rw=randread --bs=4k --direct=1 --numjobs=8 --group_reporting --time_based --runtime=15 --ioengine=psync --output-format=json 2>/dev/null)
s1=$(awk '/^cpu /{print $9}' /proc/stat)
echo "$J" | STEAL=$(( (s1-s0)*10/15 )) python3 -c '
import json,sys,time,os
j=json.load(sys.stdin)["jobs"][0]["read"]
p=j["clat_ns"]["percentile"]
print(time.strftime("%H:%M:%S",time.gmtime()), "reads/s %.0f p99 %.2f ms max %.1f ms steal %s ms/s"%(j["iops"], p["99.000000"]/1e6, j["clat_ns"]["max"]/1e6, os.environ["STEAL"]))' >> $OUT
