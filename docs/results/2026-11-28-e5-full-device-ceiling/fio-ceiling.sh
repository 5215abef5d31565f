#!/bin/bash
# fio's 4 KiB (and quietkv's 4.5 KiB) O_DIRECT random reads over the E5 source's tables, 32 synchronous jobs as E5's 32 threads: the device's ceiling and the kernel's CPU per read.
set -u
SRC=${SRC:?source dir}; TAG=${TAG:-}
cd "$SRC"; F=$(ls *.sst | tr '\n' ':' | sed 's/:$//')
for bs in 4096 4608; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  /usr/bin/time -f "%e %U %S" -o /tmp/fio-time.txt fio --name=r --filename="$F" --rw=randread --bs=$bs --blockalign=512 --direct=1 --ioengine=psync --numjobs=32 \
    --group_reporting --time_based --runtime=20 --output-format=json > /tmp/fio.json 2>/dev/null
  python3 - "$bs" "$TAG" <<'PY'
import json, sys
j = json.load(open('/tmp/fio.json'))['jobs'][0]['read']
wall, usr, sys_ = map(float, open('/tmp/fio-time.txt').read().split())
n = j['total_ios']
print(f"fio{sys.argv[2]} bs={sys.argv[1]}: {j['iops']:.0f} reads/s, mean {j['clat_ns']['mean']/1000:.0f} us, p99 {j['clat_ns']['percentile']['99.000000']/1000:.0f} us, system CPU {sys_*1e6/n:.1f} us/read, user {usr*1e6/n:.1f} us/read ({n} reads, {sys_:.1f} s sys)")
PY
done
