#!/bin/bash
# quietkv bench --experiment throughput, 1 GiB (250,000 x 4 KiB), buffered vs
# direct compaction, 2 repeats each, base (21f6731) then final (510b5a6).
for bin in base 510b5a6; do
  nice /tmp/dio-quietkv-$bin bench --experiment throughput --modes buffered,direct \
    --keys 250000 --value-size 4096 --point-reads 20000 --repeats 2 \
    --dir /tmp --out /work/wt-dio/docs/results/2026-11-23-direct-io/9-throughput/$bin \
    > $bin.log 2>&1
done
