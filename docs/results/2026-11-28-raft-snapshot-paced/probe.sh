#!/bin/bash
# The host's disk right now: 8 synchronous O_DIRECT 4 KiB random readers over a 2 GiB file for 15 s.
OUT=${1:-/dev/stdout}
r=$(fio --name=r --filename=/work/bench/probe.dat --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=8 --group_reporting --time_based --runtime=15 --output-format=json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print(round(j['iops']), 'reads/s p99', round(j['clat_ns']['percentile']['99.000000']/1000), 'us max', round(j['clat_ns']['max']/1e6,1),'ms')")
echo "$(date -u +%T) probe: $r" >> "$OUT"
