#!/bin/bash
# db_bench's workloads at full scale (16,000,000 keys x 100 B, a 1 GiB memory cgroup per run, 15 s per read phase), each run a worker process of its own: quietkv's defaults (data blocks aligned to pages), quietkv without the alignment (+align=0), RocksDB buffered with its defaults and with block_align (+align=1), 3 interleaved rounds.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --scale full --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:auto+align=0,rocksdb:buffered,rocksdb:buffered+align=1 \
  --value-size 100 --no-ycsb --duration 15 --repeats 3 --dir /work/bench-scratch/standard-full --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
