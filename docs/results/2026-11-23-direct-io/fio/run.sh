#!/bin/bash
# 1 MiB O_DIRECT sequential write then read of a new 256 MiB file on /work,
# io_uring engine, depth 1 and 4, three interleaved rounds.
for round in 1 2 3; do
  for depth in 1 4; do
    rm -f /work/wt-dio/.fio-test
    nice fio --name=seqwrite --filename=/work/wt-dio/.fio-test --rw=write --bs=1M --size=256M \
      --direct=1 --ioengine=io_uring --iodepth=$depth --end_fsync=1 --output-format=json > write-qd$depth-$round.json
    nice fio --name=seqread --filename=/work/wt-dio/.fio-test --rw=read --bs=1M --size=256M \
      --direct=1 --ioengine=io_uring --iodepth=$depth --output-format=json > read-qd$depth-$round.json
  done
done
rm -f /work/wt-dio/.fio-test
