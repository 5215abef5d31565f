#!/bin/bash
# Requests in flight at the virtio disk (/sys/block/vda/inflight, writes column),
# sampled every 5 ms while fio writes 512 MiB: O_DIRECT appending at depth 4,
# O_DIRECT into a preallocated file at depth 4, and buffered + fsync at the end.
sample() { while kill -0 $1 2>/dev/null; do cut -c10- /sys/block/vda/inflight; sleep 0.005; done; }
for cfg in "direct-append 1 none 4" "direct-prealloc 1 native 4" "buffered 0 none 1"; do
  set -- $cfg
  rm -f /work/wt-dio/.fio-test
  nice fio --name=w --filename=/work/wt-dio/.fio-test --rw=write --bs=1M --size=512M --direct=$2 \
    --ioengine=io_uring --iodepth=$4 --end_fsync=1 --fallocate=$3 --output-format=json > fio-$1.json 2>/dev/null &
  pid=$!
  sample $pid > samples-$1.txt
  wait $pid
  python3 - "$1" <<'PY'
import sys, json, statistics
name = sys.argv[1]
xs = [int(l) for l in open(f"samples-{name}.txt") if l.strip()]
busy = [x for x in xs if x > 0]
bw = json.load(open(f"fio-{name}.json"))["jobs"][0]["write"]["bw_bytes"] / 1048576
print(f"{name}: fio {bw:.0f} MiB/s; writes in flight at the disk: samples {len(xs)}, "
      f"busy {len(busy)}, mean when busy {statistics.mean(busy) if busy else 0:.2f}, max {max(xs) if xs else 0}")
PY
done
rm -f /work/wt-dio/.fio-test
