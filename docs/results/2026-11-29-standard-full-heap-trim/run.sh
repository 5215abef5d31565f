#!/bin/bash
# The standard workloads at full scale (16,000,000 keys x 100 B, a 1 GiB memory cgroup per run, 15 s per read phase and YCSB workload), each run a worker process of its own: quietkv's defaults (the heap trimmed after every background job), quietkv without the trim (+trim=0), RocksDB and fjall buffered, 3 interleaved rounds.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --scale full --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,quietkv:auto+trim=0,rocksdb:buffered,fjall:buffered \
  --value-size 100 --duration 15 --repeats 3 --dir /work/bench-scratch/standard-full --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
