#!/bin/bash
# Why direct appends do not scale with depth: preallocated (fio's default)
# vs appending (fallocate=none), 1 MiB vs 4 MiB requests, depth 1 and 4.
for round in 1 2 3; do
  for fa in none native; do
    for bs in 1M 4M; do
      for depth in 1 4; do
        rm -f /work/wt-dio/.fio-test
        bw=$(nice fio --name=w --filename=/work/wt-dio/.fio-test --rw=write --bs=$bs --size=256M --direct=1 \
          --ioengine=io_uring --iodepth=$depth --end_fsync=1 --fallocate=$fa --output-format=json 2>/dev/null \
          | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(round(j['write']['bw_bytes']/1048576,1))")
        echo "round=$round fallocate=$fa bs=$bs depth=$depth write_mib_s=$bw"
      done
    done
  done
done
rm -f /work/wt-dio/.fio-test
