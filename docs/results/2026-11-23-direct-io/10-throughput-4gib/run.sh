#!/bin/bash
# quietkv bench --experiment throughput at the README's size (1,000,000 x
# 4 KiB = 3.9 GiB), buffered vs direct compaction, 1 repeat each, final
# (510b5a6) then base (21f6731).
for bin in 510b5a6 base; do
  nice /tmp/dio-quietkv-$bin bench --experiment throughput --modes buffered,direct \
    --keys 1000000 --value-size 4096 --point-reads 100000 --repeats 1 \
    --dir /tmp --out /work/wt-dio/docs/results/2026-11-23-direct-io/10-throughput-4gib/$bin \
    > $bin.log 2>&1
done
