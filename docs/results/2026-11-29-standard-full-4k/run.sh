#!/bin/bash
# db_bench's workloads at full scale with 4 KiB values (as many bytes as the 100-byte campaign: 451,361 keys x 4096 B, 1.9 GB), a 1 GiB memory cgroup per run, 15 s per read phase, each run a worker process of its own; YCSB is left out (its records are 1 KiB whatever the value size, measured in the 100-byte campaign); quietkv's defaults and RocksDB buffered, 3 interleaved rounds (fjall left out: its worker outgrew the 1 GiB cgroup in the first round, bench-fjall-oom.log).
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --scale full --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:buffered \
  --value-size 4096 --no-ycsb --duration 15 --repeats 3 --dir /work/bench-scratch/standard-full --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
